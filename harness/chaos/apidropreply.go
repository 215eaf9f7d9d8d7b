package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// APIDropReply lets a call take effect and loses its reply: the caller hits
// its deadline not knowing the change was made (talos #8566; a Bootstrap's,
// dis-bzh/OpenAether-infra#67). A call the node refuses took no effect: its
// answer goes back and does not count.
type APIDropReply struct {
	Node  Node `yaml:"node" doc:"the node serving (or, for the etcd calls, making) the call; random: a control plane other than the bootstrap node"`
	RPC   RPC  `yaml:"rpc" doc:"ApplyConfiguration, Bootstrap, MemberAddAsLearner or MemberPromote"`
	Count int  `yaml:"count" doc:"how many replies of calls that took effect are lost (a call the node refuses keeps its answer); 0 (default): every one while active"`
}

func (APIDropReply) Kind() string      { return "api-drop-reply" }
func (APIDropReply) Destructive() bool { return false }
func (APIDropReply) Doc() string {
	return "let a call take effect and lose its reply: the caller hits its deadline not knowing it worked"
}

func (APIDropReply) Example() string {
	return "{kind: api-drop-reply, node: cp2, rpc: ApplyConfiguration, count: 1, at: 0s}"
}

func (k APIDropReply) Needs(sc *scenario.Scenario) []target.Capability { return apiNeeds(sc, k.RPC) }

func (k APIDropReply) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkRPC(c, "rpc", "node", k.Node, k.RPC)
	c.Int("count", int64(k.Count), 0, scenario.MaxCount)
}

func (k APIDropReply) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return intercept(ctx, env, k.Node, target.APIFault{RPC: string(k.RPC), Mode: target.APIDropReply, Count: k.Count})
}
