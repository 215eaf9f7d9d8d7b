package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Reset resets connections through a node's port (TCP RST) as soon as data flows.
type Reset struct {
	Node      Node             `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Port      target.Port      `yaml:"port" doc:"talos-api, etcd-client or etcd-peer"`
	Direction target.Direction `yaml:"direction" doc:"upstream (towards the node), downstream (from it) or both (default)"`
}

func (Reset) Kind() string      { return "reset" }
func (Reset) Destructive() bool { return false }
func (Reset) Doc() string {
	return "reset connections through a node's port (TCP RST) as soon as data flows"
}

func (Reset) Example() string {
	return "{kind: reset, node: cp3, port: etcd-client, at: 0s, for: 30s}"
}

func (k Reset) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ToxicOn(k.Port)}
}

func (k Reset) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkPort(c, "port", k.Node, k.Port)
	checkDirection(c, "direction", k.Direction)
}

func (k Reset) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return injectToxic(ctx, env, k.Node, k.Port, k.Direction, target.Toxic{Type: "reset_peer"})
}
