package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// PauseNode freezes a whole node (docker pause: the cgroup freezer) until
// healed: its sockets stay open, nothing on it answers, peers and clients time out.
type PauseNode struct {
	Node Node `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
}

func (PauseNode) Kind() string      { return "pause-node" }
func (PauseNode) Destructive() bool { return true }
func (PauseNode) Doc() string {
	return "freeze every process of a node until healed: connections stay open, nothing answers, peers time out"
}

func (PauseNode) Example() string { return "{kind: pause-node, node: cp1, at: 1m, for: 20s}" }

func (PauseNode) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ProcessCap(target.PauseNode)}
}

func (k PauseNode) Validate(c *scenario.FaultCheck) { c.Node("node", string(k.Node), true) }

func (k PauseNode) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return process(ctx, env, k.Node, target.PauseNode)
}
