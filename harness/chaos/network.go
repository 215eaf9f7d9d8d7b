package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// toxicFault is a network fault on one node port, carried out by the target's
// proxies (toxiproxy on the sim target).
type toxicFault struct {
	kind  string
	node  string
	port  target.Port
	toxic target.Toxic
}

func (t *toxicFault) Kind() string             { return t.kind }
func (t *toxicFault) Node() string             { return t.node }
func (t *toxicFault) Needs() target.Capability { return target.Network }

func (t *toxicFault) Inject(ctx context.Context, c target.Cluster) (target.Heal, error) {
	tx, ok := c.(target.Toxics)
	if !ok {
		return nil, fmt.Errorf("the cluster has no network proxies")
	}

	// "both" is two toxics, one per direction.
	dirs := []target.Direction{t.toxic.Direction}
	if t.toxic.Direction == "both" {
		dirs = []target.Direction{target.Upstream, target.Downstream}
	}

	var removes []func() error

	for _, d := range dirs {
		toxic := t.toxic
		toxic.Direction = d

		remove, err := tx.AddToxic(ctx, t.node, t.port, toxic)
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

// networkFault validates the fields every network fault shares: a node and a port.
func networkFault(sc *scenario.Scenario, f scenario.Fault, kind string, toxic target.Toxic) (Fault, error) {
	if f.Node == "" {
		return nil, f.Errorf(sc, "node", "%s needs a node", kind)
	}

	if f.Port == "" {
		return nil, f.Errorf(sc, "port", "%s needs a port: talos-api, etcd-client or etcd-peer", kind)
	}

	toxic.Direction = target.Direction(f.Direction)
	if toxic.Direction == "" {
		toxic.Direction = "both"
	}

	return &toxicFault{kind: kind, node: f.Node, port: target.Port(f.Port), toxic: toxic}, nil
}
