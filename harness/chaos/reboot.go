package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Reboot reboots a node: API and etcd go down and come back with its config and data.
type Reboot struct {
	Node Node `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
}

func (Reboot) Kind() string      { return "reboot" }
func (Reboot) Destructive() bool { return true }
func (Reboot) Doc() string {
	return "reboot a node: API and etcd go down and come back with its config and data"
}

func (Reboot) Example() string {
	return "{kind: reboot, node: cp2, when: {node: cp2, state: learner, after: 10s}}"
}

func (Reboot) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ProcessCap(target.RebootNode)}
}

func (k Reboot) Validate(c *scenario.FaultCheck) { c.Node("node", string(k.Node), true) }

func (k Reboot) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return process(ctx, env, k.Node, target.RebootNode)
}
