package sim

import (
	"context"
	"fmt"
	"math"

	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/diskgate"
)

// Target is the in-process simulation target ("sim").
type Target struct{}

// Name implements target.Target.
func (Target) Name() string { return "sim" }

// Capabilities implements target.Target: every primitive, on every node. API
// faults are intercepted where the node serves or makes the call, so the
// engine's own calls are covered too.
func (Target) Capabilities() []target.Capability {
	out := []target.Capability{target.PartitionNodes, target.IsolateNode, target.EtcdMembership, target.HoldTimeUnsynced, target.OffsetClock,
		target.DiscoveryRegistry, target.HoldAddressDown, target.RegistryImages}

	// A slow disk needs the kernel's seccomp user notification (package diskgate).
	if diskgate.Available() == nil {
		out = append(out, target.SlowDisk)
	}

	for _, p := range target.Ports {
		out = append(out, target.ToxicOn(p))
	}

	for _, op := range target.ProcessOps {
		out = append(out, target.ProcessCap(op))
	}

	for _, rpc := range target.RPCs {
		out = append(out, target.InterceptAt(rpc))

		if !target.EtcdRPC(rpc) {
			out = append(out, target.InterceptEngine(rpc))
		}
	}

	return out
}

// Supports implements target.Target.
func (t Target) Supports(c target.Capability, _ string) error {
	if c == target.SlowDisk {
		return diskgate.Available()
	}

	return target.Has(t, c)
}

// Disposable implements target.Target: simulated nodes live for one run.
func (Target) Disposable() bool { return true }

// TimeScale implements target.Target: simulated nodes run the scenario's
// timers, at most MaxScale(control planes) times faster than real time.
func (Target) TimeScale(sc *scenario.Scenario) float64 { return Scale(sc) }

// ScaleReason implements target.ScaleReasoner.
func (Target) ScaleReason(sc *scenario.Scenario) string {
	nodes := sc.Cluster.ControlPlanes + sc.Cluster.Workers
	if byNodes := maxScaleForNodes(nodes); byNodes < MaxScale(sc.Cluster.ControlPlanes) {
		return fmt.Sprintf("the sim runs %d nodes at most %gx faster than real time: every call to a node (an orchestrator's apply, "+
			"an observer's poll) takes real time, which must stay small against Talos's timers", nodes, byNodes)
	}

	return fmt.Sprintf("the sim runs %d control planes at most %gx faster than real time: etcd works at real speed, "+
		"and a joining member's start and catch-up must stay small against Talos's timers", sc.Cluster.ControlPlanes, MaxScale(sc.Cluster.ControlPlanes))
}

// scaleBudget is the time scale times the number of control planes the sim
// keeps to. Each member's real-time work (starting, catching up, TLS
// handshakes, commits) counts scale times over in Talos time; past three
// members at 60x a seven-member formation measured half again as long in
// Talos time as at 10x (12.5 min), and quorum-sized clusters stay at 60x.
const scaleBudget = 180

// raceSlowdown divides the budget in a binary built with the race detector
// (the tests), which runs etcd several times slower.
const raceSlowdown = 3

// MaxScale is the fastest the sim runs n control planes.
func MaxScale(n int) float64 {
	if n <= 3 {
		return math.Inf(1)
	}

	budget := float64(scaleBudget)
	if raceDetector {
		budget /= raceSlowdown
	}

	return max(math.Floor(budget/float64(n)), 1)
}

// nodeBudget is the time scale times the number of nodes the sim keeps to.
// Calls to nodes take real time: a bootstrap applying 53 configs one after
// the other, each preceded by a preflight, took 15-40 s of wall time on a
// loaded 2-core machine under the race detector, which at 60x is most of a
// 40-minute Talos budget.
const nodeBudget = 1500

// maxScaleForNodes is the fastest the sim runs a cluster of n nodes.
func maxScaleForNodes(n int) float64 {
	budget := float64(nodeBudget)
	if raceDetector {
		budget /= raceSlowdown
	}

	return max(math.Floor(budget/float64(max(n, 1))), 1)
}

// Scale is the time scale a scenario runs at on the sim.
func Scale(sc *scenario.Scenario) float64 {
	limit := min(MaxScale(sc.Cluster.ControlPlanes), maxScaleForNodes(sc.Cluster.ControlPlanes+sc.Cluster.Workers))

	return max(min(sc.TimeScale, limit), 1)
}

// Check implements target.Target: the sim runs every valid scenario whose
// config patches load and apply.
func (Target) Check(sc *scenario.Scenario) error {
	if sc.Cluster.Kubernetes {
		if err := KubernetesAvailable(); err != nil {
			return err
		}
	}

	return CheckPatches(sc)
}

// CheckPatches generates the scenario's configs as a run would (with
// addresses of no consequence) when it has config patches, so that a patch
// the machinery cannot load or apply is refused before any node starts,
// `run --plan` included, naming its field.
func CheckPatches(sc *scenario.Scenario) error {
	if len(sc.Cluster.ConfigPatches) == 0 {
		return nil
	}

	ips := map[string]string{}
	for i, name := range sc.Cluster.NodeNames() {
		ips[name] = fmt.Sprintf("127.0.0.%d", i+2)
	}

	profile, err := ProfileFor(sc.Talos)
	if err != nil {
		return err
	}

	_, err = GenerateConfigs(sc, profile, ips, "https://127.0.0.2:6443")

	return err
}

// Provision implements target.Target.
func (Target) Provision(ctx context.Context, sc *scenario.Scenario, opts target.Options) (target.Cluster, error) {
	return NewCluster(ctx, sc, opts.Seed)
}

// AddToxic implements target.Toxics with toxiproxy toxics on the node's proxy.
func (c *Cluster) AddToxic(_ context.Context, node string, port target.Port, t target.Toxic) (func() error, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	p, ok := n.proxies[port]
	if !ok {
		return nil, fmt.Errorf("node %s has no port %q", node, port)
	}

	return netfault.AddToxic(p, t)
}
