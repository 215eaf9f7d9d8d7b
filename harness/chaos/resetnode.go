package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// ResetNode resets a node as `talosctl reset` does: wiped, back to maintenance.
type ResetNode struct {
	Node     Node `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Graceful bool `yaml:"graceful" doc:"leave etcd first (talosctl reset); false (default) leaves its member behind (--graceful=false)"`
}

func (ResetNode) Kind() string      { return "reset-node" }
func (ResetNode) Destructive() bool { return true }
func (ResetNode) Doc() string {
	return "reset a node as talosctl reset does: disks wiped, back to maintenance mode"
}

func (ResetNode) Example() string {
	return "{kind: reset-node, node: cp3, graceful: false, when: {node: cp3, state: voter, after: 10s}}"
}

func (k ResetNode) op() target.ProcessOp {
	if k.Graceful {
		return target.ResetGraceful
	}

	return target.ResetForced
}

func (k ResetNode) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ProcessCap(k.op())}
}

func (k ResetNode) Validate(c *scenario.FaultCheck) { c.Node("node", string(k.Node), true) }

func (k ResetNode) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return process(ctx, env, k.Node, k.op())
}
