package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Isolate cuts a node off from every other node and from the engine.
type Isolate struct {
	Node Node `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
}

func (Isolate) Kind() string { return "isolate" }

// Destructive: on real nodes it takes the NIC down, which stays down if the
// run is killed.
func (Isolate) Destructive() bool { return true }
func (Isolate) Doc() string {
	return "cut a node off from every other node and from the engine (real nodes: NIC link down)"
}

func (Isolate) Example() string {
	return "{kind: isolate, node: random, when: {node: cp2, state: learner}, for: 1m}"
}

func (Isolate) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.IsolateNode}
}

func (k Isolate) Validate(c *scenario.FaultCheck) { c.Node("node", string(k.Node), true) }

func (k Isolate) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	pt, ok := env.Cluster.(target.Partitioner)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot isolate nodes")
	}

	return pt.Isolate(ctx, string(k.Node))
}
