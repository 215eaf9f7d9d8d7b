package simtest

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

func TestBadOptionsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{ControlPlanes: scenario.MaxControlPlanes + 1}, "simtest.Options.ControlPlanes: "},
		{Options{ControlPlanes: -1}, "simtest.Options.ControlPlanes: "},
		{Options{Workers: scenario.MaxWorkers + 1}, "simtest.Options.Workers: "},
		{Options{Talos: "v0.1"}, "simtest.Options.Talos: "},
		{Options{TimeScale: -2}, "simtest.Options.TimeScale: "},
	} {
		c, err := Start(t.Context(), tc.opts)
		if err == nil {
			c.Close() //nolint:errcheck
		}

		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one starting %q", tc.opts, err, tc.want)
		}
	}
}

func TestCluster(t *testing.T) {
	c := New(t, Options{ControlPlanes: 2, Workers: 1, TimeScale: 30})

	if got := len(c.Nodes()); got != 3 {
		t.Fatalf("%d nodes, want 3", got)
	}

	cps, ws := c.ControlPlanes(), c.Workers()
	if len(cps) != 2 || cps[0].Name != "cp1" || len(ws) != 1 || ws[0].Name != "w1" {
		t.Fatalf("control planes %+v, workers %+v", cps, ws)
	}

	for _, n := range c.Nodes() {
		if n.Endpoint != n.IP+":50000" || len(n.Config) == 0 {
			t.Errorf("node %s: endpoint %q, %d config bytes", n.Name, n.Endpoint, len(n.Config))
		}
	}

	cfg := c.Talosconfig()
	ctx := cfg.Contexts[cfg.Context]

	if want := []string{cps[0].IP, cps[1].IP}; strings.Join(ctx.Endpoints, ",") != strings.Join(want, ",") || ctx.Nodes[0] != cps[0].IP {
		t.Errorf("talosconfig endpoints %v nodes %v, want endpoints %v and cp1 the node", ctx.Endpoints, ctx.Nodes, want)
	}

	// A copy: changing it leaves the cluster's alone.
	ctx.Endpoints = nil
	if again := c.Talosconfig(); len(again.Contexts[again.Context].Endpoints) != 2 {
		t.Errorf("Talosconfig returned the cluster's own config")
	}

	heal, err := c.Inject(t.Context(), chaos.Latency{Node: "cp2", Port: target.PortEtcdPeer, Latency: scenario.Duration{Duration: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}

	if err := heal(); err != nil {
		t.Errorf("heal: %v", err)
	}

	if err := heal(); err != nil {
		t.Errorf("heal twice: %v", err)
	}

	for _, tc := range []struct {
		fault chaos.Kind
		want  string
	}{
		{chaos.Latency{Node: "cp3", Port: target.PortEtcdPeer, Latency: scenario.Duration{Duration: time.Millisecond}}, "simtest.Inject(latency).node: "},
		{chaos.Bandwidth{Node: "cp1", Port: "etcd", RateKBps: 4}, "simtest.Inject(bandwidth).port: "},
		{chaos.Bandwidth{Node: "cp1", Port: target.PortEtcdPeer}, "simtest.Inject(bandwidth).rateKBps: "},
		{chaos.CrashEtcd{Node: scenario.RandomNode}, "simtest: Inject crash-etcd: name the node"},
	} {
		if _, err := c.Inject(t.Context(), tc.fault); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one starting %q", tc.fault, err, tc.want)
		}
	}
}
