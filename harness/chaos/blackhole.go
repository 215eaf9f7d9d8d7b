package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Blackhole lets connections to a node's port open but no byte through.
type Blackhole struct {
	Node      Node             `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Port      target.Port      `yaml:"port" doc:"talos-api, etcd-client or etcd-peer"`
	Direction target.Direction `yaml:"direction" doc:"upstream (towards the node), downstream (from it) or both (default)"`
}

func (Blackhole) Kind() string      { return "blackhole" }
func (Blackhole) Destructive() bool { return false }
func (Blackhole) Doc() string {
	return "connections to a node's port open, but no byte passes (calls hang until their deadline)"
}

func (Blackhole) Example() string {
	return "{kind: blackhole, node: cp1, port: talos-api, when: {node: cp1, state: left-maintenance}, for: 1m}"
}

func (k Blackhole) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ToxicOn(k.Port)}
}

func (k Blackhole) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkPort(c, "port", k.Node, k.Port)
	checkDirection(c, "direction", k.Direction)
}

// Inject uses toxiproxy's timeout toxic with no timeout: data is held forever.
func (k Blackhole) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return injectToxic(ctx, env, k.Node, k.Port, k.Direction, target.Toxic{Type: "timeout"})
}
