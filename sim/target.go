package sim

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/netfault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Target is the in-process simulation target ("sim").
type Target struct{}

// Name implements target.Target.
func (Target) Name() string { return "sim" }

// Capabilities implements target.Target: every primitive, on every node. API
// faults are intercepted where the node serves or makes the call, so the
// engine's own calls are covered too.
func (Target) Capabilities() []target.Capability {
	out := []target.Capability{target.PartitionNodes, target.IsolateNode}

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
func (t Target) Supports(c target.Capability, _ string) error { return target.Has(t, c) }

// Disposable implements target.Target: simulated nodes live for one run.
func (Target) Disposable() bool { return true }

// TimeScale implements target.Target: simulated nodes run the scenario's timers.
func (Target) TimeScale(sc *scenario.Scenario) float64 { return sc.TimeScale }

// Check implements target.Target: the sim runs every valid scenario.
func (Target) Check(*scenario.Scenario) error { return nil }

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
