package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/secretbundle"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
)

// doctorCluster starts an `up`-style cluster with its files written.
func doctorCluster(t *testing.T) (*sim.Cluster, string) {
	t.Helper()

	sc, err := upScenario(upOptions{controlPlanes: 3, talos: scenario.DefaultProfile, timeScale: 60})
	if err != nil {
		t.Fatal(err)
	}

	c, err := sim.NewCluster(context.Background(), sc, 1)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	dir := t.TempDir()
	if err := writeUpFiles(dir, c); err != nil {
		t.Fatal(err)
	}

	return c, dir
}

func applyTo(t *testing.T, ctx context.Context, n target.Node) {
	t.Helper()

	cl, err := talosclient.Insecure(ctx, n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() //nolint:errcheck

	if _, err := cl.ApplyConfiguration(ctx, &machine.ApplyConfigurationRequest{Data: n.Config, Mode: machine.ApplyConfigurationRequest_AUTO}); err != nil {
		t.Fatal(err)
	}
}

func bootstrapOn(t *testing.T, ctx context.Context, c *sim.Cluster, n target.Node) {
	t.Helper()

	cl, err := talosclient.WithConfig(ctx, c.Talosconfig(), n.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() //nolint:errcheck

	deadline := time.Now().Add(30 * time.Second)

	for {
		err := cl.Bootstrap(ctx, &machine.BootstrapRequest{})
		if err == nil {
			return
		}

		if time.Now().After(deadline) {
			t.Fatal(err)
		}

		time.Sleep(50 * time.Millisecond)
	}
}

// doctorUntil runs `talchaos doctor` until its output names every want, and
// returns that output.
func doctorUntil(t *testing.T, dir string, c *sim.Cluster, want ...string) string {
	t.Helper()

	var ips []string
	for _, n := range c.Nodes() {
		ips = append(ips, n.Address)
	}

	deadline := time.Now().Add(time.Minute)

	for {
		code, out := run(t, "doctor", "--talosconfig", filepath.Join(dir, "talosconfig"), "--nodes", strings.Join(ips, ","))

		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(out, w)
		}

		if !missing && code == exitFail {
			return out
		}

		if time.Now().After(deadline) {
			t.Fatalf("doctor (exit %d) never named %v:\n%s", code, want, out)
		}

		time.Sleep(200 * time.Millisecond)
	}
}

func TestDoctorNamesFailureStates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("node left in maintenance", func(t *testing.T) {
		c, dir := doctorCluster(t)
		nodes := c.Nodes()

		applyTo(t, ctx, nodes[0])
		applyTo(t, ctx, nodes[2])
		bootstrapOn(t, ctx, c, nodes[0])

		out := doctorUntil(t, dir, c, "node-in-maintenance  "+nodes[1].Address, "apply-config --insecure -n "+nodes[1].Address)
		if strings.Contains(out, "node-in-maintenance  "+nodes[0].Address) {
			t.Errorf("a configured node is called in maintenance:\n%s", out)
		}
	})

	t.Run("bootstrap on two nodes", func(t *testing.T) {
		c, dir := doctorCluster(t)
		nodes := c.Nodes()

		for _, n := range nodes {
			applyTo(t, ctx, n)
		}

		bootstrapOn(t, ctx, c, nodes[0])
		bootstrapOn(t, ctx, c, nodes[2])

		doctorUntil(t, dir, c, "split-brain", "reset --system-labels-to-wipe EPHEMERAL")
	})

	t.Run("stale learner", func(t *testing.T) {
		c, dir := doctorCluster(t)
		nodes := c.Nodes()

		heal, err := c.InterceptAPI(ctx, "cp2", target.APIFault{RPC: "MemberAddAsLearner", Mode: target.APIDropReply, Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer heal() //nolint:errcheck

		for _, n := range nodes[:2] {
			applyTo(t, ctx, n)
		}

		bootstrapOn(t, ctx, c, nodes[0])

		doctorUntil(t, dir, c, "stale-learner", "peer-url-exists", "etcd remove-member")
	})

	t.Run("talosconfig from other secrets", func(t *testing.T) {
		c, dir := doctorCluster(t)
		nodes := c.Nodes()

		for _, n := range nodes {
			applyTo(t, ctx, n)
		}

		bundle, err := secretbundle.New(config.TalosVersionCurrent)
		if err != nil {
			t.Fatal(err)
		}

		in, err := generate.NewInput("other", "https://127.0.0.1:6443", sim.KubernetesVersion, generate.WithSecretsBundle(bundle))
		if err != nil {
			t.Fatal(err)
		}

		other, err := in.Talosconfig()
		if err != nil {
			t.Fatal(err)
		}

		if err := other.Save(filepath.Join(dir, "talosconfig")); err != nil {
			t.Fatal(err)
		}

		doctorUntil(t, dir, c, "pki-mismatch  "+nodes[0].Address, "--with-secrets")
	})
}
