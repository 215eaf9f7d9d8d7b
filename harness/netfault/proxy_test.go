package netfault

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// echoOnce writes b through conn and reads it back.
func echoOnce(t *testing.T, conn net.Conn, b string) {
	t.Helper()

	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}

	if _, err := conn.Write([]byte(b)); err != nil {
		t.Fatalf("write through the proxy: %v", err)
	}

	got := make([]byte, len(b))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != b {
		t.Fatalf("echo through the proxy: %q, %v", got, err)
	}
}

// ended reports whether the peer closed conn (a read ends in EOF or a reset,
// not in the deadline).
func ended(t *testing.T, conn net.Conn) bool {
	t.Helper()

	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}

	_, err := conn.Read(make([]byte, 1))

	var ne net.Error

	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestProxyStopClosesEveryConnection(t *testing.T) {
	proxy := startProxy(t, startEcho(t, nil))

	var conns []net.Conn

	for i := range 3 {
		c, err := net.DialTimeout("tcp", proxy.Listen, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { _ = c.Close() })
		echoOnce(t, c, string(rune('a'+i)))
		conns = append(conns, c)
	}

	proxy.Stop()
	proxy.Stop() // a second Stop is a no-op

	for i, c := range conns {
		if !ended(t, c) {
			t.Errorf("connection %d still open after Stop", i)
		}
	}

	if c, err := net.DialTimeout("tcp", proxy.Listen, 3*time.Second); err == nil {
		_ = c.Close()

		t.Error("the proxy still accepts after Stop")
	}
}

// Down, a proxy ends the connections it holds and every one it takes in,
// without dialling its upstream for them; back up, it relays again.
func TestProxySetDown(t *testing.T) {
	var dials atomic.Int32

	d := &net.Dialer{Timeout: 3 * time.Second}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

	proxy, err := startProxyDialing(srv, t.Name(), "127.0.0.1:0", startEcho(t, nil), func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)

		return d.DialContext(ctx, "tcp", addr)
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(proxy.Stop)

	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", proxy.Listen, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { _ = c.Close() })

		return c
	}

	before := dial()
	echoOnce(t, before, "a")

	proxy.SetDown(true)

	if !ended(t, before) {
		t.Error("a connection held when the proxy went down is still open")
	}

	if !ended(t, dial()) {
		t.Error("a connection taken in while down is relayed")
	}

	if n := dials.Load(); n != 1 {
		t.Errorf("the upstream was dialled %d times, want once: a connection taken in while down reached it", n)
	}

	proxy.SetDown(false)
	echoOnce(t, dial(), "b")
}

func TestProxyToxicReachesOpenConnections(t *testing.T) {
	proxy := startProxy(t, startEcho(t, nil))

	var conns []net.Conn

	for range 2 {
		c, err := net.DialTimeout("tcp", proxy.Listen, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { _ = c.Close() })
		echoOnce(t, c, "x")
		conns = append(conns, c)
	}

	def, err := json.Marshal(toxicDef{Name: "rst", Type: "reset_peer", Stream: "downstream", Toxicity: 1, Attributes: map[string]any{"timeout": 0}})
	if err != nil {
		t.Fatal(err)
	}

	addToxic(t, proxy, def)

	for i, c := range conns {
		_, _ = c.Write([]byte("y"))

		if !ended(t, c) {
			t.Errorf("connection %d not reset by a toxic added after it opened", i)
		}
	}
}

func TestProxyForgetsClosedConnections(t *testing.T) {
	proxy := startProxy(t, startEcho(t, nil))

	const n = 300

	for range n {
		c, err := net.DialTimeout("tcp", proxy.Listen, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}

		echoOnce(t, c, "x")
		_ = c.Close()
	}

	proxy.mu.Lock()
	kept := len(proxy.conns)
	proxy.mu.Unlock()

	// Two ends a connection; without forgetting closed ones it would keep 600.
	if kept > n*2/3 {
		t.Errorf("the proxy keeps %d connection ends after %d connections came and went", kept, n)
	}
}

// A connection whose upstream does not answer (a powered-off node) holds no
// other connection back, and Stop ends its dial and closes it.
func TestProxyDialsEachConnectionOnItsOwn(t *testing.T) {
	upstream := startEcho(t, nil)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

	var (
		calls   atomic.Int32
		hanging = make(chan struct{})
	)

	proxy, err := startProxyDialing(srv, t.Name(), "127.0.0.1:0", upstream, func(ctx context.Context, addr string) (net.Conn, error) {
		if calls.Add(1) == 1 {
			close(hanging)
			<-ctx.Done() // the first dial is never answered

			return nil, ctx.Err()
		}

		var d net.Dialer

		return d.DialContext(ctx, "tcp", addr)
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(proxy.Stop)

	first, err := net.DialTimeout("tcp", proxy.Listen, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = first.Close() })

	select {
	case <-hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not dial for the first connection")
	}

	second, err := net.DialTimeout("tcp", proxy.Listen, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { _ = second.Close() })
	echoOnce(t, second, "relayed while the first connection's dial waits")

	proxy.Stop()

	if !ended(t, first) {
		t.Error("the connection whose dial was pending is still open after Stop")
	}
}

// A proxy that follows its upstream refuses connections while the upstream
// does not listen, as the port of a server that is down does, and relays
// again once it listens; one that does not follow takes them and ends them.
func TestProxyFollowsUpstream(t *testing.T) {
	// An upstream that can stop listening and start again on its port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	addr := l.Addr().String()

	var wg sync.WaitGroup

	serve := func(l net.Listener) {
		wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}

				wg.Go(func() {
					defer c.Close()

					_, _ = io.Copy(c, c)
				})
			}
		})
	}

	serve(l)

	proxy := startProxy(t, addr)
	proxy.FollowUpstream()

	dial := func() (net.Conn, error) { return net.DialTimeout("tcp", proxy.Listen, 3*time.Second) }

	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}

	echoOnce(t, c, "a")
	c.Close()

	l.Close() // the upstream stops listening

	// The first connection after is taken, then refused upstream; the
	// proxy stops listening.
	eventually := func(what string, ok func() bool) {
		t.Helper()

		for deadline := time.Now().Add(10 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("after 10 s: %s", what)
			}

			time.Sleep(20 * time.Millisecond)
		}
	}

	eventually("the proxy still takes connections", func() bool {
		c, err := dial()
		if err == nil {
			ended(t, c)
			c.Close()
		}

		return errors.Is(err, syscall.ECONNREFUSED)
	})

	// The upstream listens again on its port: so does the proxy.
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}

	serve(l)

	eventually("the proxy does not relay again", func() bool {
		c, err := dial()
		if err != nil {
			return false
		}

		defer c.Close()

		echoOnce(t, c, "b")

		return true
	})

	// Told that its upstream is gone, it refuses the very next connection.
	l.Close()
	proxy.UpstreamGone()

	if c, err := dial(); !errors.Is(err, syscall.ECONNREFUSED) {
		if err == nil {
			c.Close()
		}

		t.Errorf("the first connection after UpstreamGone: %v, want it refused", err)
	}

	proxy.Stop()
	wg.Wait()
}
