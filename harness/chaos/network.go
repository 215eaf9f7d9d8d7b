package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// What the network kinds share: a node's port and a direction, checked and
// carried out the same way. Their parameters are declared in each kind's file.

// both is the direction of a toxic in each direction (two toxics).
const both target.Direction = "both"

var directions = []string{string(target.Upstream), string(target.Downstream), string(both)}

// Bounds of the network parameters (real time: they act on real traffic).
const (
	maxLatency   = time.Minute
	maxRateKBps  = 10_000_000
	minNetDelay  = time.Millisecond
	maxCloseWait = time.Minute
)

func portNames() []string {
	out := make([]string, 0, len(target.Ports))
	for _, p := range target.Ports {
		out = append(out, string(p))
	}

	return out
}

// checkPort validates the port parameter (field) of a fault on node's port:
// the etcd ports exist on control planes only.
func checkPort(c *scenario.FaultCheck, field string, node Node, port target.Port) {
	if c.OneOf(field, string(port), "port", portNames()) && port != target.PortTalosAPI &&
		node != "" && node != scenario.RandomNode && !scenario.IsControlPlane(string(node)) &&
		slices.Contains(c.Scenario().Cluster.NodeNames(), string(node)) {
		c.Errorf(field, "%s is a worker, which runs no etcd: %s exists on control planes only", node, port)
	}
}

// checkDirection validates an optional direction parameter (field).
func checkDirection(c *scenario.FaultCheck, field string, dir target.Direction) {
	if dir != "" {
		c.OneOf(field, string(dir), "direction", directions)
	}
}

// injectToxic puts the toxic on the node's port, once per direction for "both".
func injectToxic(ctx context.Context, env *Env, node Node, port target.Port, dir target.Direction, t target.Toxic) (target.Heal, error) {
	tx, ok := env.Cluster.(target.Toxics)
	if !ok {
		return nil, fmt.Errorf("the cluster has no network proxies")
	}

	dirs := []target.Direction{dir}
	if dir == "" || dir == both {
		dirs = []target.Direction{target.Upstream, target.Downstream}
	}

	var removes []func() error

	for _, d := range dirs {
		t.Direction = d

		remove, err := tx.AddToxic(ctx, string(node), port, t)
		if err != nil {
			for _, r := range removes {
				r() //nolint:errcheck
			}

			return nil, err
		}

		removes = append(removes, remove)
	}

	return func() error {
		var first error

		for _, r := range removes {
			if err := r(); err != nil && first == nil {
				first = err
			}
		}

		return first
	}, nil
}
