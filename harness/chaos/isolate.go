package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// isolate: a node is cut off from every other node and from the engine.
type isolate struct{ node string }

func (i *isolate) Kind() string             { return "isolate" }
func (i *isolate) Node() string             { return i.node }
func (i *isolate) Needs() target.Capability { return target.Partition }

func (i *isolate) Inject(ctx context.Context, c target.Cluster) (target.Heal, error) {
	pt, ok := c.(target.Partitioner)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot isolate nodes")
	}

	return pt.Isolate(ctx, i.node)
}

func init() {
	register("isolate", func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		if f.Node == "" {
			return nil, f.Errorf(sc, "node", "isolate needs a node")
		}

		return &isolate{node: f.Node}, nil
	})
}
