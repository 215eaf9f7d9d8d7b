package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/target"
)

// process carries out a process operation on a node, for the process kinds.
func process(ctx context.Context, env *Env, node Node, op target.ProcessOp) (target.Heal, error) {
	pr, ok := env.Cluster.(target.Processes)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot act on node processes")
	}

	return pr.Process(ctx, string(node), op)
}

// clocks is the cluster's clock primitives, for the time kinds.
func clocks(env *Env) (target.Clocks, error) {
	cl, ok := env.Cluster.(target.Clocks)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot act on node clocks")
	}

	return cl, nil
}
