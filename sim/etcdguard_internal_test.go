package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
)

// startEtcd starts a one-member embedded etcd with opts on its gRPC servers;
// the test closes it (closeEtcd) unless cleanup is set.
func startEtcd(t *testing.T, opts []grpc.ServerOption, cleanup bool) *embed.Etcd {
	t.Helper()

	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "error"
	cfg.GRPCAdditionalServerOptions = opts

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

	if cleanup {
		t.Cleanup(e.Close)
	} else {
		t.Cleanup(func() {
			select {
			case <-e.Server.StopNotify():
			default:
				e.Close() // the test failed before its close
			}
		})
	}

	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("etcd not ready")
	}

	return e
}

// A handler that panics while its etcd is stopping answers etcd's "server
// stopped"; one that panics while etcd runs is a bug and still panics.
func TestStopGuard(t *testing.T) {
	e := startEtcd(t, nil, true)

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

// fakeStream is a server stream with only a context.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // what Context returns
}

func (s fakeStream) Context() context.Context { return s.ctx }

// drain ends the streams being served and returns once their handlers have
// (a Watch handler returns after its send loop), answering "server
// stopped"; afterwards new streams and calls are refused the same way.
func TestStopGuardDrain(t *testing.T) {
	g := &stopGuard{}

	var (
		started = make(chan struct{})
		ended   atomic.Bool // the handler's send loop
		result  = make(chan error, 1)
	)

	go func() {
		result <- g.stream(nil, fakeStream{ctx: context.Background()}, nil, func(_ any, ss grpc.ServerStream) error {
			close(started)
			<-ss.Context().Done()
			time.Sleep(50 * time.Millisecond) // the send loop's last read of the backend
			ended.Store(true)

			return rpctypes.ErrGRPCWatchCanceled
		})
	}()

	<-started
	g.drain(time.Minute)

	if !ended.Load() {
		t.Fatal("drain returned before the stream's handler did")
	}

	if err := <-result; !errors.Is(err, rpctypes.ErrGRPCStopped) {
		t.Errorf("the drained stream answered %v, want %v", err, rpctypes.ErrGRPCStopped)
	}

	called := false
	err := g.stream(nil, fakeStream{ctx: context.Background()}, nil, func(any, grpc.ServerStream) error { called = true; return nil })

	if called || !errors.Is(err, rpctypes.ErrGRPCStopped) {
		t.Errorf("a stream after drain: served %v, answered %v", called, err)
	}

	if _, err := g.unary(context.Background(), nil, nil, func(context.Context, any) (any, error) { called = true; return nil, nil }); called || !errors.Is(err, rpctypes.ErrGRPCStopped) {
		t.Errorf("a call after drain: served %v, answered %v", called, err)
	}
}

// A member killed while watches with previous values follow a stream of
// writes (what a kube-apiserver keeps open) stops, without a panic. (It never
// reproduced the panic without the drain in 15 kills: a kill then took 7.5 s,
// the client servers' graceful stop waiting out etcd's request timeout for
// the open watches; with the drain, 0.5 s.)
func TestKillWithWatchers(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			g := &stopGuard{}
			e := startEtcd(t, g.options(), false)
			g.e.Store(e)

			client, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Clients[0].Addr().String()}, DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			watches := make([]clientv3.WatchChan, 4)
			for w := range watches {
				watches[w] = client.Watch(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithPrevKV())
			}

			writes := make(chan struct{})
			go func() {
				defer close(writes)

				for k := 0; ctx.Err() == nil; k++ {
					if _, err := client.Put(ctx, fmt.Sprintf("/registry/%d", k%10), fmt.Sprint(k)); err != nil {
						return
					}
				}
			}()

			for range 20 { // the watches are sending
				<-watches[0]
			}

			closeEtcd(e, g, true)
			cancel()
			<-writes
		})
	}
}
