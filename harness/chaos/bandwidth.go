package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Bandwidth limits the throughput of a node's port.
type Bandwidth struct {
	Node      Node             `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Port      target.Port      `yaml:"port" doc:"talos-api, etcd-client or etcd-peer"`
	Direction target.Direction `yaml:"direction" doc:"upstream (towards the node), downstream (from it) or both (default)"`
	RateKBps  int64            `yaml:"rateKBps" doc:"the limit in KiB/s: 1 to 10000000"`
}

func (Bandwidth) Kind() string      { return "bandwidth" }
func (Bandwidth) Destructive() bool { return false }
func (Bandwidth) Doc() string {
	return "limit the throughput of a node's port (a learner's snapshot crawls, its promotion waits)"
}

func (Bandwidth) Example() string {
	return "{kind: bandwidth, node: cp1, port: etcd-peer, direction: downstream, rateKBps: 64, at: 0s, until: {node: cp2, state: learner, after: 2m}}"
}

func (k Bandwidth) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ToxicOn(k.Port)}
}

func (k Bandwidth) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkPort(c, "port", k.Node, k.Port)
	checkDirection(c, "direction", k.Direction)
	c.Int("rateKBps", k.RateKBps, 1, maxRateKBps)
}

func (k Bandwidth) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return injectToxic(ctx, env, k.Node, k.Port, k.Direction, target.Toxic{Type: "bandwidth", RateKBps: k.RateKBps})
}
