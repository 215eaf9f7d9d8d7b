package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// PauseEtcd freezes a control plane's etcd (SIGSTOP) until healed: its peers time out on it.
type PauseEtcd struct {
	Node Node `yaml:"node" doc:"a control plane; random: a control plane other than the bootstrap node"`
}

func (PauseEtcd) Kind() string      { return "pause-etcd" }
func (PauseEtcd) Destructive() bool { return true }
func (PauseEtcd) Doc() string {
	return "freeze a control plane's etcd (SIGSTOP) until healed: its peers time out on it"
}

func (PauseEtcd) Example() string { return "{kind: pause-etcd, node: cp1, at: 1m, for: 20s}" }

func (PauseEtcd) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ProcessCap(target.PauseEtcd)}
}

func (k PauseEtcd) Validate(c *scenario.FaultCheck) {
	c.ControlPlane("node", string(k.Node), "pause-etcd freezes etcd")
}

func (k PauseEtcd) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return process(ctx, env, k.Node, target.PauseEtcd)
}
