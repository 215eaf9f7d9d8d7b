package netfault

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// testPKI is a CA issuing certificates whose CN names a peer, like the sim's
// etcd peer certificates.
type testPKI struct {
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	pool  *x509.CertPool
	mu    sync.Mutex
	certs map[string]tls.Certificate
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}

	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}

	pool := x509.NewCertPool()
	pool.AddCert(ca)

	return &testPKI{ca: ca, caKey: key, pool: pool, certs: map[string]tls.Certificate{}}
}

// cert is a server and client certificate for cn, valid for 127.0.0.1.
func (p *testPKI) cert(t testing.TB, cn string) tls.Certificate {
	t.Helper()

	p.mu.Lock()
	defer p.mu.Unlock()

	if c, ok := p.certs[cn]; ok {
		return c
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(int64(len(p.certs) + 2)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}

	c := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	p.certs[cn] = c

	return c
}

// serverConfig is the sim's etcd peer setup: TLS 1.2 at most, client
// certificates required.
func (p *testPKI) serverConfig(t testing.TB, auth tls.ClientAuthType, maxVersion uint16) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.cert(t, "server")}, ClientCAs: p.pool,
		ClientAuth: auth, MaxVersion: maxVersion,
	}
}

// clientConfig presents cn's certificate, or none for cn "".
func (p *testPKI) clientConfig(t testing.TB, cn string, maxVersion uint16) *tls.Config {
	conf := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MaxVersion: maxVersion}
	if cn != "" {
		conf.Certificates = []tls.Certificate{p.cert(t, cn)}
	}

	return conf
}

// recorder tees what a connection writes.
type recorder struct {
	net.Conn

	mu   *sync.Mutex
	sent *[]byte
}

func (r recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	*r.sent = append(*r.sent, b...)
	r.mu.Unlock()

	return r.Conn.Write(b)
}

// captureClientBytes runs a real handshake and returns what the client sent:
// the handshake and, once it completes, a little application data. It runs
// over a loopback TCP pair rather than net.Pipe: a synchronous pipe deadlocks
// when Go's TLS 1.3 server writes session tickets while the client is still
// writing its certificate flight (Go's own tls tests use TCP for that reason).
func captureClientBytes(t testing.TB, p *testPKI, clientCN string, auth tls.ClientAuthType, maxVersion uint16) []byte {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() //nolint:errcheck

	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() //nolint:errcheck

	deadline := time.Now().Add(5 * time.Second)
	_ = c.SetDeadline(deadline)
	_ = s.SetDeadline(deadline)

	var (
		mu   sync.Mutex
		sent []byte
	)

	srvDone := make(chan error, 1)

	go func() {
		srv := tls.Server(s, p.serverConfig(t, auth, maxVersion))

		err := srv.Handshake()
		if err == nil {
			_, err = io.ReadFull(srv, make([]byte, 5))
		}

		srvDone <- err
	}()

	cli := tls.Client(recorder{Conn: c, mu: &mu, sent: &sent}, p.clientConfig(t, clientCN, maxVersion))

	err = cli.Handshake()
	if err == nil {
		_, err = cli.Write([]byte("hello"))
	}

	if srvErr := <-srvDone; err != nil || srvErr != nil {
		t.Fatalf("handshake: client %v, server %v", err, srvErr)
	}

	mu.Lock()
	defer mu.Unlock()

	return sent
}

// startEcho runs an echo server (TLS when conf is set) on loopback until the
// test ends.
func startEcho(t *testing.T, conf *tls.Config) string {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)

	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}

			if conf != nil {
				c = tls.Server(c, conf)
			}

			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()

			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()

				_, _ = io.Copy(c, c) // a failed handshake ends it too
			})
		}
	})

	t.Cleanup(func() {
		_ = l.Close()

		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()

		wg.Wait()
	})

	return l.Addr().String()
}

// startProxy puts a proxy with the given toxics in front of upstream.
func startProxy(t *testing.T, upstream string, toxicDefs ...[]byte) *Proxy {
	t.Helper()

	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

	proxy, err := StartProxy(srv, t.Name(), "127.0.0.1:0", upstream)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(proxy.Stop)

	for _, def := range toxicDefs {
		addToxic(t, proxy, def)
	}

	return proxy
}

func addToxic(t *testing.T, proxy *Proxy, def []byte) {
	t.Helper()

	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(string(def))); err != nil {
		t.Fatalf("add toxic %s: %v", def, err)
	}
}

// peer is a TLS 1.2 client connection presenting a peer certificate.
type peer struct {
	conn *tls.Conn
	r    *bufio.Reader
}

func dialPeer(t *testing.T, p *testPKI, addr, cn string) (*peer, error) {
	t.Helper()

	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, p.clientConfig(t, cn, tls.VersionTLS12))
	if err != nil {
		return nil, err
	}

	t.Cleanup(func() { _ = conn.Close() })

	return &peer{conn: conn, r: bufio.NewReader(conn)}, nil
}

func (c *peer) echo(msg string) error {
	_ = c.conn.SetDeadline(time.Now().Add(3 * time.Second))

	if _, err := c.conn.Write([]byte(msg + "\n")); err != nil {
		return err
	}

	got, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}

	if got != msg+"\n" {
		return errors.New("echo mismatch: " + got)
	}

	return nil
}

// closedWithin reports whether the peer's connection is closed by the other
// end within d, without the peer sending anything.
func (c *peer) closedWithin(d time.Duration) error {
	_ = c.conn.SetReadDeadline(time.Now().Add(d))

	_, err := c.r.ReadByte()

	var ne net.Error

	switch {
	case err == nil:
		return errors.New("unexpected data")
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("still open after " + d.String())
	default:
		return nil
	}
}
