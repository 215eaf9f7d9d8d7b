package chaos

import (
	"context"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// APIDelay lets a call take effect and delivers its reply late, past the
// caller's deadline if the delay is long enough.
type APIDelay struct {
	Node  Node              `yaml:"node" doc:"the node serving (or, for the etcd calls, making) the call; random: a control plane other than the bootstrap node"`
	RPC   RPC               `yaml:"rpc" doc:"ApplyConfiguration, Bootstrap, MemberAddAsLearner or MemberPromote"`
	Delay scenario.Duration `yaml:"delay" doc:"how late the reply comes, Talos time (like the deadlines it outlasts): 1ms to 1h"`
	Count int               `yaml:"count" doc:"how many replies are delayed; 0 (default): every call's while active"`
}

func (APIDelay) Kind() string      { return "api-delay" }
func (APIDelay) Destructive() bool { return false }
func (APIDelay) Doc() string {
	return "let a call take effect and deliver its reply late (past the caller's deadline if long enough)"
}

func (APIDelay) Example() string {
	return "{kind: api-delay, node: cp1, rpc: Bootstrap, delay: 45s, count: 1, at: 0s}"
}

func (k APIDelay) Needs(sc *scenario.Scenario) []target.Capability { return apiNeeds(sc, k.RPC) }

func (k APIDelay) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkRPC(c, "rpc", "node", k.Node, k.RPC)
	c.Int("count", int64(k.Count), 0, scenario.MaxCount)
	c.Duration("delay", k.Delay, time.Millisecond, maxAPIDelay)
}

func (k APIDelay) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return intercept(ctx, env, k.Node, target.APIFault{
		RPC: string(k.RPC), Mode: target.APIDelay, Delay: env.Clock.Wall(k.Delay.Duration), Count: k.Count,
	})
}
