package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// partition: two nodes stop hearing each other, both ways (raft peer traffic and
// the nodes' own etcd client calls); the rest of the cluster is unaffected.
type partition struct{ a, b string }

func (p *partition) Kind() string             { return "partition" }
func (p *partition) Node() string             { return p.a + "|" + p.b }
func (p *partition) Needs() target.Capability { return target.Partition }

func (p *partition) Inject(ctx context.Context, c target.Cluster) (target.Heal, error) {
	pt, ok := c.(target.Partitioner)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot partition nodes")
	}

	return pt.Partition(ctx, []string{p.a}, []string{p.b})
}

func init() {
	register("partition", func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		if len(f.Nodes) != 2 || f.Nodes[0] == f.Nodes[1] {
			return nil, f.Errorf(sc, "nodes", "partition needs two different nodes, e.g. [cp1, cp2]")
		}

		return &partition{a: f.Nodes[0], b: f.Nodes[1]}, nil
	})
}
