package netns_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talchaos/talchaos/sim/netns"
)

// reexec runs one test of this binary inside a namespace, skipping when the
// machine cannot make one.
func reexec(t *testing.T, ctx context.Context, test string) (int, string) {
	t.Helper()

	var out bytes.Buffer

	code, err := netns.Reexec(ctx, []string{"-test.run=^" + test + "$", "-test.v", "-test.count=1"}, nil, &out, &out, nil)
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("no namespace here: %v", err)
	}

	if err != nil {
		t.Fatal(err)
	}

	return code, out.String()
}

// Inside, the loopback interface comes up, takes IPv6 addresses a listener
// binds and a client reaches, and an address routed nowhere fails as an
// unrouted one does; outside, none of it exists.
func TestAddressesInside(t *testing.T) {
	const node, unrouted = "fd00:101::11", "fd00:101:fe::12"

	if netns.Inside() {
		if err := netns.Setup(); err != nil {
			t.Fatal(err)
		}

		if err := netns.AddAddress(netip.MustParseAddr(node)); err != nil {
			t.Fatal(err)
		}

		l, err := net.Listen("tcp", net.JoinHostPort(node, "2380"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()

		c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatalf("dialling the node's own address: %v", err)
		}
		c.Close()

		if err := netns.AddUnreachable(netip.MustParseAddr(unrouted)); err != nil {
			t.Fatal(err)
		}

		_, err = net.DialTimeout("tcp", net.JoinHostPort(unrouted, "2380"), 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "no route to host") {
			t.Fatalf("dialling an unrouted address: %v, want no route to host", err)
		}

		if err := netns.RemoveUnreachable(netip.MustParseAddr(unrouted)); err != nil {
			t.Fatal(err)
		}

		if err := netns.RemoveAddress(netip.MustParseAddr(node)); err != nil {
			t.Fatal(err)
		}

		return
	}

	if code, out := reexec(t, t.Context(), "TestAddressesInside"); code != 0 || !strings.Contains(out, "--- PASS") {
		t.Fatalf("inside the namespace (exit %d):\n%s", code, out)
	}

	if l, err := net.Listen("tcp", net.JoinHostPort(node, "0")); err == nil {
		l.Close()
		t.Fatalf("%s is on this host's network too", node)
	}
}

// An interrupted parent passes its signal on; the child's exit code comes
// back.
func TestSignalPassesOn(t *testing.T) {
	if netns.Inside() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGHUP)
		os.Stdout.WriteString("ready\n")

		select {
		case <-sigs:
			os.Exit(7)
		case <-time.After(time.Minute):
			t.Fatal("no signal came")
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	out := &onReady{ready: cancel}

	code, err := netns.Reexec(ctx, []string{"-test.run=^TestSignalPassesOn$"}, nil, out, out,
		func(context.Context) os.Signal { return syscall.SIGHUP })
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("no namespace here: %v", err)
	}

	if err != nil || code != 7 {
		t.Fatalf("exit %d, %v, want 7 from the child's handler:\n%s", code, err, out.String())
	}
}

// onReady collects output and calls ready once the child says it is. (Not
// an embedded bytes.Buffer: io.Copy would use its ReadFrom, never Write.)
type onReady struct {
	buf   bytes.Buffer
	ready func()
}

func (o *onReady) String() string { return o.buf.String() }

func (o *onReady) Write(p []byte) (int, error) {
	n, err := o.buf.Write(p)
	if strings.Contains(o.buf.String(), "ready\n") && o.ready != nil {
		o.ready()
		o.ready = nil
	}

	return n, err
}
