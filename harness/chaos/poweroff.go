package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// PowerOff powers a node off until healed; it boots again with its config and data.
type PowerOff struct {
	Node Node `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
}

func (PowerOff) Kind() string      { return "power-off" }
func (PowerOff) Destructive() bool { return true }
func (PowerOff) Doc() string {
	return "power a node off until healed; it boots again with its config and data"
}

func (PowerOff) Example() string {
	return "{kind: power-off, node: cp2, when: {node: cp3, state: member}, for: 3m}"
}

func (PowerOff) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ProcessCap(target.PowerOff)}
}

func (k PowerOff) Validate(c *scenario.FaultCheck) { c.Node("node", string(k.Node), true) }

func (k PowerOff) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return process(ctx, env, k.Node, target.PowerOff)
}
