package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// What the API kinds share: a node, an RPC and a count, checked and carried
// out the same way. Their parameters are declared in each kind's file.

// RPC is a parameter naming an intercepted call: one of target.RPCs.
type RPC string

// maxAPIDelay bounds an api-delay (Talos time, like the deadlines it outlasts).
const maxAPIDelay = time.Hour

// checkRPC validates the rpc parameter (field) of a fault on node
// (nodeField): the etcd calls are made by control planes only.
func checkRPC(c *scenario.FaultCheck, field, nodeField string, node Node, rpc RPC) {
	if c.OneOf(field, string(rpc), "rpc", target.RPCs) && target.EtcdRPC(string(rpc)) {
		c.ControlPlane(nodeField, string(node), string(rpc)+" is called by a joining control plane's own Talos")
	}
}

// apiNeeds is what intercepting rpc takes: the etcd calls are made by the node
// itself, and a user's own bootstrap command (exec) is no engine client, so
// both need interception where the node is; the built-in orchestrators' calls
// can also be intercepted in the engine's own client.
func apiNeeds(sc *scenario.Scenario, rpc RPC) []target.Capability {
	if target.EtcdRPC(string(rpc)) || sc.Orchestrator.Name == "exec" {
		return []target.Capability{target.InterceptAt(string(rpc))}
	}

	return []target.Capability{target.InterceptEngine(string(rpc))}
}

func intercept(ctx context.Context, env *Env, node Node, f target.APIFault) (target.Heal, error) {
	af, ok := env.Cluster.(target.APIFaults)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot intercept API calls")
	}

	return af.InterceptAPI(ctx, string(node), f)
}
