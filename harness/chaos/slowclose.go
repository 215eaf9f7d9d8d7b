package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// SlowClose delays the close of every connection through a node's port.
type SlowClose struct {
	Node      Node              `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Port      target.Port       `yaml:"port" doc:"talos-api, etcd-client or etcd-peer"`
	Direction target.Direction  `yaml:"direction" doc:"upstream (towards the node), downstream (from it) or both (default)"`
	Delay     scenario.Duration `yaml:"delay" doc:"how much later a close goes through, real time: 1ms to 1m"`
}

func (SlowClose) Kind() string      { return "slow-close" }
func (SlowClose) Destructive() bool { return false }
func (SlowClose) Doc() string {
	return "delay the close of every connection through a node's port (half-closed peers linger)"
}

func (SlowClose) Example() string {
	return "{kind: slow-close, node: cp2, port: etcd-client, direction: downstream, delay: 2s, at: 30s, for: 2m}"
}

func (k SlowClose) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ToxicOn(k.Port)}
}

func (k SlowClose) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkPort(c, "port", k.Node, k.Port)
	checkDirection(c, "direction", k.Direction)
	c.Duration("delay", k.Delay, minNetDelay, maxCloseWait)
}

func (k SlowClose) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return injectToxic(ctx, env, k.Node, k.Port, k.Direction, target.Toxic{Type: "slow_close", Timeout: k.Delay.Duration})
}
