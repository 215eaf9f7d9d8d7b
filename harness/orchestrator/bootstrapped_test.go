package orchestrator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
)

// A node already bootstrapped when the resilient orchestrator's Bootstrap
// reaches it (AlreadyExists "etcd data directory is not empty") while another
// control plane runs a second cluster (talos #5500, bootstrap-twice) is no
// bootstrap to go on from: the orchestrator stops and names the clusters.
// (AlreadyExists after its own unanswered Bootstrap is built-in
// bootstrap-reply-lost-resilient.)
func TestBootstrapStopsOnASecondCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// cp2 pulls etcd's image for two Talos minutes: its join has not begun
	// when it is bootstrapped too.
	sc := &scenario.Scenario{Name: "second-cluster", Talos: scenario.DefaultProfile, TimeScale: 60, Cluster: scenario.Cluster{
		ControlPlanes: 2, Nodes: map[string]scenario.NodeOverride{"cp2": {EtcdImagePull: scenario.Duration{Duration: 2 * time.Minute}}},
	}}

	c, err := sim.NewCluster(ctx, sc, 1)
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	env := &Env{Nodes: c.Nodes(), Talosconfig: c.Talosconfig(), BootstrapNode: "cp1", Log: eventlog.New(), Clock: clock.New(60)}
	r := &Resilient{}

	for _, n := range env.Nodes {
		if err := r.apply(ctx, env, n); err != nil {
			t.Fatal(err)
		}
	}

	// Bootstrapped both, as a script looping over the nodes does.
	for _, n := range env.Nodes {
		if err := r.bootstrap(ctx, env, n); err != nil {
			t.Fatal(err)
		}
	}

	for _, n := range env.Nodes {
		waitEtcdRunning(ctx, t, env, r, n)
	}

	err = r.bootstrap(ctx, env, env.Nodes[0])
	if err == nil || !strings.Contains(err.Error(), "the control planes run 2 separate etcd clusters ([cp1], [cp2])") {
		t.Fatalf("bootstrap of an already bootstrapped cp1 beside a second cluster: %v", err)
	}
}

func waitEtcdRunning(ctx context.Context, t *testing.T, env *Env, r *Resilient, n target.Node) {
	t.Helper()

	sec, err := env.secure(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	defer sec.Close() //nolint:errcheck

	for ctx.Err() == nil {
		if s, err := r.etcdService(ctx, env, sec); err == nil && s.GetState() == "Running" {
			resp, err := sec.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{QueryLocal: true})
			if err == nil && len(resp.GetMessages()) > 0 && len(resp.GetMessages()[0].GetMembers()) > 0 {
				return
			}
		}

		time.Sleep(50 * time.Millisecond)
	}

	t.Fatalf("%s's etcd does not run", n.Name)
}
