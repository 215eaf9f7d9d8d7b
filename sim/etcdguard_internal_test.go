package sim

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/embed"
)

// A handler that panics while its etcd is stopping answers etcd's "server
// stopped"; one that panics while etcd runs is a bug and still panics.
func TestStopGuard(t *testing.T) {
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"

	for _, u := range []*[]url.URL{&cfg.ListenClientUrls, &cfg.AdvertiseClientUrls} {
		*u = []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	peer := url.URL{Scheme: "http", Host: l.Addr().String()}
	l.Close()

	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}

	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("etcd not ready")
	}

	g := &stopGuard{}
	g.e.Store(e)

	unary := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = errors.New("panicked")
			}
		}()

		handler := func(context.Context, any) (any, error) { panic("closed backend") }
		_, err = g.unary(context.Background(), nil, nil, handler)

		return err
	}

	if err := unary(); err == nil || err.Error() != "panicked" {
		t.Errorf("a panic while etcd runs: %v, want the panic", err)
	}

	e.Server.HardStop()
	<-e.Server.StopNotify()

	if err := unary(); !errors.Is(err, rpctypes.ErrGRPCStopped) {
		t.Errorf("a panic while etcd stops: %v, want %v", err, rpctypes.ErrGRPCStopped)
	}
}
