package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"

	"github.com/talchaos/talchaos/harness/syncbuf"
)

// `talchaos up` prints the endpoints and the talosconfig within seconds, and
// Ctrl-C leaves no listener and no temp dir behind.
func TestUpStartsAndCleansUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var out syncbuf.Buffer

	root := newRoot()
	root.SetArgs([]string{"up", "--time-scale", "60"})
	root.SetOut(&out)

	done := make(chan error, 1)
	start := time.Now()

	go func() { done <- root.ExecuteContext(ctx) }()

	talosconfigRE := regexp.MustCompile(`talosconfig: (\S+)`)

	var tcPath string

	for tcPath == "" {
		if m := talosconfigRE.FindStringSubmatch(out.String()); m != nil {
			tcPath = m[1]
		}

		if time.Since(start) > 10*time.Second {
			t.Fatalf("no talosconfig printed within 10s:\n%s", out.String())
		}

		time.Sleep(20 * time.Millisecond)
	}

	cfg, err := clientconfig.Open(tcPath)
	if err != nil {
		t.Fatal(err)
	}

	c := cfg.Contexts[cfg.Context]
	if len(c.Endpoints) != 3 || len(c.Nodes) != 1 || c.Nodes[0] != c.Endpoints[0] {
		t.Fatalf("talosconfig endpoints %v nodes %v: want 3 endpoints, the first as default node", c.Endpoints, c.Nodes)
	}

	for _, ep := range c.Endpoints {
		if !strings.Contains(out.String(), ep+":50000") {
			t.Errorf("endpoint %s:50000 not printed", ep)
		}
	}

	cancel()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("up: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop within 30s of Ctrl-C")
	}

	if _, err := os.Stat(tcPath); !os.IsNotExist(err) {
		t.Errorf("the temp dir with %s is still there", tcPath)
	}

	for _, ep := range c.Endpoints {
		for _, port := range []int{50000, 2379, 2380} {
			l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ep, port))
			if err != nil {
				t.Errorf("%s:%d still in use: %v", ep, port, err)

				continue
			}

			l.Close() //nolint:errcheck
		}
	}
}

// startUpCmd runs `talchaos up ARGS` until its talosconfig is printed and
// returns what it printed and a stop function that waits for it to end.
func startUpCmd(t *testing.T, args ...string) (string, func()) {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())

	var out syncbuf.Buffer

	done := make(chan int, 1)

	go func() { done <- execute(ctx, append([]string{"up"}, args...), &out, &out) }()

	deadline := time.Now().Add(20 * time.Second)

	for !strings.Contains(out.String(), "talosconfig: ") {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("up exited %d:\n%s", code, out.String())
		default:
		}

		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no talosconfig printed:\n%s", out.String())
		}

		time.Sleep(20 * time.Millisecond)
	}

	return out.String(), func() {
		cancel()
		<-done
	}
}

// --cidr puts the nodes at the same addresses on every start, so scripts
// survive a restart; a block in use or a value that is no loopback /24 is
// refused.
func TestUpTakesAStableBlock(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "127.0.5.0/16", "127.0.5.7/24", "127.0.0.0/24", "127.0.255.0/24", "nonsense"} {
		if code, out := run(t, "up", "--cidr", bad); code != exitInput || !strings.Contains(out, "--cidr") {
			t.Errorf("--cidr %s: exit %d, want 2 naming the flag:\n%s", bad, code, out)
		}
	}

	for range 2 {
		out, stop := startUpCmd(t, "--cidr", "127.0.247.0/24", "--time-scale", "60")

		for _, ep := range []string{"127.0.247.2:50000", "127.0.247.3:50000", "127.0.247.4:50000"} {
			if !strings.Contains(out, ep) {
				t.Errorf("%s not printed:\n%s", ep, out)
			}
		}

		if code, out := run(t, "up", "--cidr", "127.0.247.0/24"); code != exitHarness || !strings.Contains(out, "127.0.247.0/24 is in use") {
			t.Errorf("a second cluster in the same block: exit %d:\n%s", code, out)
		}

		stop()
	}
}

// A --fault that is not one up can hold is refused before anything starts
// (exit 2), naming the flag and the field.
func TestUpFaultFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fault", "time-unsynced"}, `--fault "time-unsynced": give a fault as a YAML mapping`},
		{[]string{"--fault", "{kind: time-unsynced, node: cp7}"}, `--fault "{kind: time-unsynced, node: cp7}": node: unknown node "cp7": one of cp1, cp2, cp3`},
		{[]string{"--fault", "{kind: clock-offset, node: cp1}"}, `--fault "{kind: clock-offset, node: cp1}": ahead: required: ahead or behind`},
		{[]string{"--fault", "{kind: time-unsynced, node: cp1, until: {node: cp1, state: voter}}"}, `until: up holds its faults from the start`},
		{[]string{"--fault", "{kind: time-unsynced, node: cp1}", "--target", "container"}, `kind: target container cannot inject time-unsynced`},
	} {
		code, stderr := run(t, append([]string{"up", "--dir", t.TempDir()}, tc.args...)...)
		if code != exitInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("up %v: exit %d, %q; want exit 2 saying %q", tc.args, code, stderr, tc.want)
		}
	}
}
