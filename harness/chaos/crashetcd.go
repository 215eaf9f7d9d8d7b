package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// CrashEtcd kills a control plane's etcd (SIGKILL); Talos restarts it from its data dir.
type CrashEtcd struct {
	Node Node `yaml:"node" doc:"a control plane; random: a control plane other than the bootstrap node"`
}

func (CrashEtcd) Kind() string      { return "crash-etcd" }
func (CrashEtcd) Destructive() bool { return true }
func (CrashEtcd) Doc() string {
	return "kill a control plane's etcd (SIGKILL); Talos restarts it from its data dir"
}

func (CrashEtcd) Example() string {
	return "{kind: crash-etcd, node: cp1, when: {node: cp3, state: learner}}"
}

func (CrashEtcd) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ProcessCap(target.CrashEtcd)}
}

func (k CrashEtcd) Validate(c *scenario.FaultCheck) {
	c.ControlPlane("node", string(k.Node), "crash-etcd kills etcd")
}

func (k CrashEtcd) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return process(ctx, env, k.Node, target.CrashEtcd)
}
