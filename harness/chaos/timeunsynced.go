package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// TimeUnsynced keeps a node's time servers from answering (NTP blocked or
// intercepted, talos #6493, #6818): Talos holds etcd and kubelet ("Waiting
// for time sync") and refuses Bootstrap ("time is not in sync yet") until a
// server answers, machine.time.bootTimeout has passed since boot, or sync is
// disabled (machine.time.disabled). Healed (`for:`, `until:`), the next
// query answers and the time syncs.
//
// The node's time counts as never synced in this boot: a fault from the
// start stands for time servers unreachable since power-on (Talos keeps a
// time it has once synced until it boots again).
type TimeUnsynced struct {
	Node Node `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
}

func (TimeUnsynced) Kind() string      { return "time-unsynced" }
func (TimeUnsynced) Destructive() bool { return false }
func (TimeUnsynced) Doc() string {
	return "keep a node's time servers from answering: its time does not sync, so Talos holds etcd and kubelet and refuses Bootstrap " +
		"(until healed, or machine.time.bootTimeout has passed since boot)"
}

func (TimeUnsynced) Example() string { return "{kind: time-unsynced, node: cp1, at: 0s, for: 3m}" }

func (TimeUnsynced) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.HoldTimeUnsynced}
}

func (k TimeUnsynced) Validate(c *scenario.FaultCheck) { c.Node("node", string(k.Node), true) }

func (k TimeUnsynced) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	cl, err := clocks(env)
	if err != nil {
		return nil, err
	}

	return cl.HoldTimeUnsynced(ctx, string(k.Node))
}
