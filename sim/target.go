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

// Capabilities implements target.Target.
func (Target) Capabilities() []target.Capability {
	return []target.Capability{target.Network, target.Partition, target.Process, target.API}
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
