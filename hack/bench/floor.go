package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"

	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// bareFormation forms an etcd cluster of n embedded members the way Talos
// forms one, without Talos: the first member starts a new cluster; every
// other member at once runs Talos's join loop (add itself as a learner, on
// an error again after 3 s + up to 1 s), starts, then runs the promote loop
// (at once, then every 15 s + up to 1 s) — Talos's timers divided by scale,
// etcd configured as the sim configures it (50 ms tick, 500 ms election, one
// learner at most, strict reconfiguration check, mutual TLS 1.2, no fsync).
// It returns the time from the first member's start to the last promotion.
func bareFormation(ctx context.Context, dir string, n int, scale float64, seed uint64) (time.Duration, error) {
	pki, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return 0, err
	}

	clk := clock.New(scale)

	rng := mrand.New(mrand.NewPCG(seed, 0xf1004)) //nolint:gosec // jitter
	var rngMu sync.Mutex

	jittered := func(d, jitter time.Duration) time.Duration {
		rngMu.Lock()
		defer rngMu.Unlock()

		return clk.Wall(d + time.Duration(rng.Int64N(int64(jitter))))
	}

	type member struct {
		name            string
		peerURL, client url.URL
		e               *embed.Etcd
	}

	members := make([]*member, n)

	for i := range members {
		peer, client, err := freePorts()
		if err != nil {
			return 0, err
		}

		members[i] = &member{
			name:    fmt.Sprintf("cp%d", i+1),
			peerURL: url.URL{Scheme: "https", Host: peer},
			client:  url.URL{Scheme: "https", Host: client},
		}
	}

	defer func() {
		for _, m := range members {
			if m.e != nil {
				m.e.Close()
			}
		}
	}()

	start := func(m *member, initial string, state string) error {
		cfg := embed.NewConfig()
		cfg.Name = m.name
		cfg.Dir = filepath.Join(dir, m.name)
		cfg.InitialCluster = initial
		cfg.ClusterState = state
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peerURL}, []url.URL{m.peerURL}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.client}, []url.URL{m.client}
		cfg.ListenMetricsUrls = nil
		cfg.ClientTLSInfo = pki.info()
		cfg.PeerTLSInfo = pki.info()
		cfg.TlsMaxVersion = "TLS1.2"
		cfg.TickMs, cfg.ElectionMs = 50, 500
		cfg.UnsafeNoFsync = true
		cfg.LogLevel = "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			return err
		}

		m.e = e

		select {
		case <-e.Server.ReadyNotify():
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("%s did not become ready", m.name)
		}
	}

	tlsCfg, err := pki.info().ClientConfig()
	if err != nil {
		return 0, err
	}

	first := members[0]
	began := time.Now()

	if err := start(first, first.name+"="+first.peerURL.String(), embed.ClusterStateFlagNew); err != nil {
		return 0, err
	}

	debugf("%s ready after %s", first.name, time.Since(began))

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{first.client.String()}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer cli.Close() //nolint:errcheck

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		last time.Time
		errs []error
	)

	for _, m := range members[1:] {
		wg.Go(func() {
			err := func() error {
				var resp *clientv3.MemberAddResponse

				for {
					attempt, cancel := context.WithTimeout(ctx, clk.WallAtLeast(30*time.Second, etcdOpFloor))
					r, err := cli.MemberAddAsLearner(attempt, []string{m.peerURL.String()})
					cancel()

					if err == nil {
						resp = r

						debugf("%s added as learner after %s", m.name, time.Since(began))

						break
					}

					debugf("%s add: %v", m.name, err)

					time.Sleep(jittered(3*time.Second, time.Second))
				}

				initial := ""

				for _, mem := range resp.Members {
					name := mem.Name
					if mem.ID == resp.Member.ID {
						name = m.name
					}

					if name == "" {
						continue
					}

					for _, u := range mem.PeerURLs {
						if initial != "" {
							initial += ","
						}

						initial += name + "=" + u
					}
				}

				if err := start(m, initial, embed.ClusterStateFlagExisting); err != nil {
					return err
				}

				for {
					attempt, cancel := context.WithTimeout(ctx, clk.WallAtLeast(30*time.Second, minTimeout))
					_, err := cli.MemberPromote(attempt, resp.Member.ID)
					cancel()

					debugf("%s promote after %s: %v", m.name, time.Since(began), err)

					if err == nil {
						mu.Lock()
						last = time.Now()
						mu.Unlock()

						return nil
					}

					time.Sleep(jittered(15*time.Second, time.Second))
				}
			}()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}

	wg.Wait()

	if err := errors.Join(errs...); err != nil {
		return 0, err
	}

	return last.Sub(began), nil
}

// The sim's floors under scaled client deadlines (sim/cluster.go): etcd
// commits at real speed.
const (
	etcdOpFloor = 2 * time.Second
	minTimeout  = time.Second
)

// freePorts are two free ports on 127.0.0.1.
func freePorts() (string, string, error) {
	var out [2]string

	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", err
		}

		out[i] = l.Addr().String()
		l.Close() //nolint:errcheck
	}

	return out[0], out[1], nil
}

// pki is a CA and one certificate for 127.0.0.1, server and client alike.
type pki struct{ ca, cert, key string }

func (p *pki) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: p.cert, KeyFile: p.key, TrustedCAFile: p.ca, ClientCertAuth: true}
}

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}

	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}

	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}

	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}

	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}

	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}

	p := &pki{ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "member.crt"), key: filepath.Join(dir, "member.key")}

	for path, block := range map[string]*pem.Block{
		p.ca:   {Type: "CERTIFICATE", Bytes: caDER},
		p.cert: {Type: "CERTIFICATE", Bytes: der},
		p.key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, err
		}
	}

	return p, nil
}

// debugf reports a step of the floor's formation when BENCH_DEBUG is set.
func debugf(format string, args ...any) {
	if os.Getenv("BENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "floor: "+format+"\n", args...)
	}
}
