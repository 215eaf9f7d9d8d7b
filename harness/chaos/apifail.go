package chaos

import (
	"context"

	"github.com/talchaos/talchaos/harness/apifault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// APIFail refuses a call before it has any effect, with a gRPC error code.
type APIFail struct {
	Node  Node   `yaml:"node" doc:"the node serving (or, for the etcd calls, making) the call; random: a control plane other than the bootstrap node"`
	RPC   RPC    `yaml:"rpc" doc:"ApplyConfiguration, Bootstrap, MemberAddAsLearner or MemberPromote"`
	Code  string `yaml:"code" doc:"the gRPC code of the refusal, e.g. Unavailable (not OK)"`
	Count int    `yaml:"count" doc:"how many calls are refused; 0 (default): every call while active"`
}

func (APIFail) Kind() string      { return "api-fail" }
func (APIFail) Destructive() bool { return false }
func (APIFail) Doc() string {
	return "refuse a call before it has any effect, with a gRPC error (a call that failed and changed nothing)"
}

func (APIFail) Example() string {
	return "{kind: api-fail, node: cp2, rpc: ApplyConfiguration, code: Unavailable, count: 2, at: 0s}"
}

func (k APIFail) Needs(sc *scenario.Scenario) []target.Capability { return apiNeeds(sc, k.RPC) }

func (k APIFail) Validate(c *scenario.FaultCheck) {
	c.Node("node", string(k.Node), true)
	checkRPC(c, "rpc", "node", k.Node, k.RPC)
	c.Int("count", int64(k.Count), 0, scenario.MaxCount)

	code, ok := apifault.CodeByName(k.Code)

	switch {
	case k.Code == "":
		c.Errorf("code", "required: a gRPC code name, e.g. Unavailable")
	case !ok:
		c.Errorf("code", "unknown gRPC code %q: e.g. Unavailable, DeadlineExceeded, Internal", k.Code)
	case code == 0:
		c.Errorf("code", "OK is no failure: the call would seem to succeed with nothing applied; pick an error code, e.g. Unavailable")
	}
}

func (k APIFail) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	return intercept(ctx, env, k.Node, target.APIFault{RPC: string(k.RPC), Mode: target.APIFail, Code: k.Code, Count: k.Count})
}
