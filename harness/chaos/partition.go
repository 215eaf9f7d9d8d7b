package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Partition cuts two nodes apart, both ways; the rest of the cluster is unaffected.
type Partition struct {
	Nodes []Node `yaml:"nodes" doc:"the two nodes that stop hearing each other, e.g. [cp1, cp2]"`
}

func (Partition) Kind() string { return "partition" }

// Destructive: a cut that outlives a killed run would split a real cluster.
func (Partition) Destructive() bool { return true }
func (Partition) Doc() string {
	return "two nodes stop hearing each other, both ways (raft traffic and their etcd client calls)"
}

func (Partition) Example() string {
	return "{kind: partition, nodes: [cp1, cp3], when: {node: cp3, state: learner}, for: 90s}"
}

func (Partition) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.PartitionNodes}
}

func (k Partition) Validate(c *scenario.FaultCheck) {
	if len(k.Nodes) != 2 {
		c.Errorf("nodes", "needs exactly two nodes, e.g. [cp1, cp2], got %d", len(k.Nodes))

		return
	}

	for i, n := range k.Nodes {
		c.Node(fmt.Sprintf("nodes[%d]", i), string(n), false)
	}

	if k.Nodes[0] == k.Nodes[1] {
		c.Errorf("nodes[1]", "%s twice: a partition is between two different nodes", k.Nodes[0])
	}
}

func (k Partition) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	pt, ok := env.Cluster.(target.Partitioner)
	if !ok || len(k.Nodes) != 2 {
		return nil, fmt.Errorf("the cluster cannot partition nodes")
	}

	return pt.Partition(ctx, []string{string(k.Nodes[0])}, []string{string(k.Nodes[1])})
}
