package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Latency delays every chunk through a node's port by latency ± jitter.
type Latency struct {
	Node      Node              `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Port      target.Port       `yaml:"port" doc:"talos-api, etcd-client or etcd-peer"`
	Direction target.Direction  `yaml:"direction" doc:"upstream (towards the node), downstream (from it) or both (default)"`
	Latency   scenario.Duration `yaml:"latency" doc:"added to every chunk, real time: 1ms to 1m"`
	Jitter    scenario.Duration `yaml:"jitter" doc:"± spread around the latency, drawn from the run's seed; at most the latency"`
}

func (Latency) Kind() string      { return "latency" }
func (Latency) Destructive() bool { return false }
func (Latency) Doc() string {
	return "delay the traffic through a node's port (real time: it acts on real etcd and API traffic)"
}

func (Latency) Example() string {
	return "{kind: latency, node: cp2, port: etcd-peer, direction: both, latency: 200ms, jitter: 50ms, at: 30s, for: 2m}"
}

func (k Latency) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.ToxicOn(k.Port)}
}

func (k Latency) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkPort(c, "port", k.Node, k.Port)
	checkDirection(c, "direction", k.Direction)
	c.Duration("latency", k.Latency, minNetDelay, maxLatency)

	if k.Jitter.Duration > k.Latency.Duration {
		c.Errorf("jitter", "%s is larger than the latency %s", k.Jitter, k.Latency)
	}
}

func (k Latency) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return injectToxic(ctx, env, k.Node, k.Port, k.Direction, target.Toxic{
		Type: "latency", Latency: k.Latency.Duration, Jitter: k.Jitter.Duration, JitterSeed: env.Seed,
	})
}
