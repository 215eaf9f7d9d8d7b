package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// WipeEtcd wipes a control plane's EPHEMERAL partition and reboot it: config kept, etcd data gone, the join starts over.
type WipeEtcd struct {
	Node Node `yaml:"node" doc:"a control plane; random: a control plane other than the bootstrap node"`
}

func (WipeEtcd) Kind() string      { return "wipe-etcd" }
func (WipeEtcd) Destructive() bool { return true }
func (WipeEtcd) Doc() string {
	return "wipe a control plane's EPHEMERAL partition and reboot it: config kept, etcd data gone, the join starts over"
}

func (WipeEtcd) Example() string {
	return "{kind: wipe-etcd, node: cp3, when: {node: cp3, state: learner}}"
}

func (WipeEtcd) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ProcessCap(target.WipeEtcd)}
}

func (k WipeEtcd) Validate(c *scenario.FaultCheck) {
	c.ControlPlane("node", string(k.Node), "wipe-etcd wipes etcd data")
}

func (k WipeEtcd) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return process(ctx, env, k.Node, target.WipeEtcd)
}
