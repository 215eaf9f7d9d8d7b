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
	"github.com/talchaos/talchaos/harness/syncbuf"
	"github.com/talchaos/talchaos/harness/talosclient"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
)

// doctorCluster starts an `up`-style cluster with its files written.
func doctorCluster(t *testing.T) (*sim.Cluster, string) {
	t.Helper()

	return doctorClusterAt(t, 60)
}

// doctorClusterAt is doctorCluster with Talos timers divided by scale.
func doctorClusterAt(t *testing.T, scale float64) (*sim.Cluster, string) {
	t.Helper()

	sc, err := upScenario(upOptions{controlPlanes: 3, talos: scenario.DefaultProfile, timeScale: scale})
	if err != nil {
		t.Fatal(err)
	}

	return startUp(t, sc)
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

// doctorRun runs the CLI as main does, output captured (see run).
func doctorRun(args ...string) (int, string) {
	var out syncbuf.Buffer

	code := execute(context.Background(), args, &out, &out)

	return code, out.String()
}

// doctorUntil runs `talchaos doctor` until its output names every want, and
// returns that output.
func doctorUntil(t *testing.T, dir string, c *sim.Cluster, want ...string) string {
	t.Helper()

	return doctorUntilWith(t, dir, c, nil, want...)
}

// doctorUntilWith is doctorUntil with more flags.
func doctorUntilWith(t *testing.T, dir string, c *sim.Cluster, flags []string, want ...string) string {
	t.Helper()

	var ips []string
	for _, n := range c.Nodes() {
		ips = append(ips, n.Address)
	}

	deadline := time.Now().Add(time.Minute)

	for {
		code, out := doctorRun(append([]string{"doctor", "--talosconfig", filepath.Join(dir, "talosconfig"), "--nodes", strings.Join(ips, ",")}, flags...)...)

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

// The state of the issue: cp2 does not answer and cp3 is a learner that is
// never promoted (every MemberPromote it makes is refused).
func TestDoctorUnreachableNodeAndLearner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// learnerWithoutPromotion applies cp1 and cp3, bootstraps cp1, and makes cp3
	// a learner whose promotion is refused for good; cp2 is powered off.
	learnerWithoutPromotion := func(t *testing.T, c *sim.Cluster) []target.Node {
		t.Helper()

		nodes := c.Nodes()

		heal, err := c.InterceptAPI(ctx, "cp3", target.APIFault{RPC: "MemberPromote", Mode: target.APIFail, Code: "Unavailable"})
		if err != nil {
			t.Fatal(err)
		}

		t.Cleanup(func() { heal() }) //nolint:errcheck

		if _, err := c.Process(ctx, "cp2", target.PowerOff); err != nil {
			t.Fatal(err)
		}

		applyTo(t, ctx, nodes[0])
		applyTo(t, ctx, nodes[2])
		bootstrapOn(t, ctx, c, nodes[0])

		return nodes
	}

	t.Run("promotion failed for good", func(t *testing.T) {
		c, dir := doctorClusterAt(t, 60)
		nodes := learnerWithoutPromotion(t, c)
		cp2, cp3 := nodes[1].Address, nodes[2].Address

		out := doctorUntilWith(t, dir, c, []string{"--time-scale", "60"},
			"api-unreachable  "+cp2, "does not answer\n    evidence: rpc error: code = Unavailable", "talosctl -n "+cp2+" version",
			"learner-not-promoted  "+cp3, "(cp3) is a learner whose promotion window has closed",
			"failed promoting member", "etcd service Running since",
			"etcd remove-member", "talosctl -n "+cp3+" reset --system-labels-to-wipe EPHEMERAL")

		for _, bad := range []string{"no problem found", "learner-promotion-pending", "api-unreachable  " + nodes[0].Address, "api-unreachable  " + cp3} {
			if strings.Contains(out, bad) {
				t.Errorf("doctor says %q:\n%s", bad, out)
			}
		}

		// Only when no node answers at all is it not a finding but a failure to look.
		code, out := doctorRun("doctor", "--talosconfig", filepath.Join(dir, "talosconfig"), "--nodes", cp2)
		if code != exitHarness || !strings.Contains(out, "api-unreachable  "+cp2) {
			t.Errorf("doctor on the powered-off node alone: exit %d, want %d:\n%s", code, exitHarness, out)
		}
	})

	t.Run("promotion may be pending", func(t *testing.T) {
		// At a quarter of real time the 10-minute promote window lasts 150 s:
		// the doctor looks long before it ends.
		c, dir := doctorClusterAt(t, 4)
		nodes := learnerWithoutPromotion(t, c)
		cp3 := nodes[2].Address

		out := doctorUntilWith(t, dir, c, []string{"--time-scale", "4"},
			"api-unreachable  "+nodes[1].Address,
			"learner-promotion-pending  "+cp3, "(cp3) is still a learner", "into its 10m0s promote window", "gives up in",
			"etcd status", "# if it is still a learner when the window has passed")

		if strings.Contains(out, "learner-not-promoted") {
			t.Errorf("a learner inside its window is called never promoted:\n%s", out)
		}
	})
}

func TestDoctorTimeScaleMustBePositive(t *testing.T) {
	for _, scale := range []string{"0", "-60", "0.5", "10001"} {
		code, out := doctorRun("doctor", "--nodes", "127.0.0.1", "--time-scale", scale)
		if code != exitInput || !strings.Contains(out, "--time-scale: must be between 1 and 10000, got "+scale) {
			t.Errorf("--time-scale %s: exit %d, want %d:\n%s", scale, code, exitInput, out)
		}
	}
}

// The inventory `up` writes is enough for the doctor: nodes, talosconfig and
// the nodes' time scale come from it.
func TestDoctorReadsAnInventory(t *testing.T) {
	c, dir := doctorCluster(t)

	code, out := doctorRun("doctor", "--inventory", filepath.Join(dir, "inventory.yaml"))
	if code != exitFail {
		t.Fatalf("exit %d, want 1 (every node in maintenance):\n%s", code, out)
	}

	for _, n := range c.Nodes() {
		if !strings.Contains(out, "node-in-maintenance  "+n.Address) {
			t.Errorf("no node-in-maintenance finding for %s:\n%s", n.Address, out)
		}
	}

	if code, out := doctorRun("doctor", "--inventory", filepath.Join(dir, "missing.yaml")); code != exitInput {
		t.Errorf("missing inventory: exit %d:\n%s", code, out)
	}
}

// Without --nodes the doctor asks the talosconfig context's nodes, as
// talosctl does; --context picks another context, and one that is not there
// is bad input.
func TestDoctorTakesNodesFromTheTalosconfig(t *testing.T) {
	c, dir := doctorCluster(t)
	nodes := c.Nodes()
	cfg := filepath.Join(dir, "talosconfig")

	code, out := doctorRun("doctor", "--talosconfig", cfg)
	if code != exitFail || !strings.Contains(out, "node-in-maintenance  "+nodes[0].Address) || strings.Contains(out, nodes[1].Address+" ") {
		t.Errorf("exit %d, want 1 with the context's one node (%s) in maintenance:\n%s", code, nodes[0].Address, out)
	}

	if code, out := doctorRun("doctor", "--talosconfig", cfg, "--context", "no-such-context"); code != exitInput || !strings.Contains(out, `no context "no-such-context"`) {
		t.Errorf("unknown context: exit %d:\n%s", code, out)
	}
}

// --endpoints reaches the nodes through one Talos API endpoint (apid's
// proxying, the "node" metadata), as talosctl -e E -n N: a node whose own
// API port is given wrong is still read through the endpoint.
func TestDoctorThroughAnEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, dir := doctorCluster(t)
	nodes := c.Nodes()

	applyTo(t, ctx, nodes[0])
	applyTo(t, ctx, nodes[1])
	bootstrapOn(t, ctx, c, nodes[0])

	cfg := filepath.Join(dir, "talosconfig")
	wrongPort := nodes[1].Address + ":1"

	if _, out := doctorRun("doctor", "--talosconfig", cfg, "-n", wrongPort); !strings.Contains(out, nodes[1].Address+"  down") {
		t.Fatalf("asked directly on a closed port the node is down:\n%s", out)
	}

	deadline := time.Now().Add(time.Minute)

	for {
		_, out := doctorRun("doctor", "--talosconfig", cfg, "-e", nodes[0].Address, "-n", wrongPort)
		if strings.Contains(out, nodes[1].Address+"  configured") {
			break
		}

		if time.Now().After(deadline) {
			t.Fatalf("never read %s through %s:\n%s", nodes[1].Address, nodes[0].Address, out)
		}

		time.Sleep(200 * time.Millisecond)
	}
}
