package chaos

import (
	"context"
	"fmt"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// processFault acts on a node's processes or power: crash or pause etcd, reboot,
// power off, wipe etcd data, reset.
type processFault struct {
	kind string
	node string
	op   target.ProcessOp
}

func (p *processFault) Kind() string             { return p.kind }
func (p *processFault) Node() string             { return p.node }
func (p *processFault) Needs() target.Capability { return target.Process }

func (p *processFault) Inject(ctx context.Context, c target.Cluster) (target.Heal, error) {
	pr, ok := c.(target.Processes)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot act on node processes")
	}

	return pr.Process(ctx, p.node, p.op)
}

func processBuilder(kind string, op func(f scenario.Fault) target.ProcessOp) builder {
	return func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		if f.Node == "" {
			return nil, f.Errorf(sc, "node", "%s needs a node", kind)
		}

		return &processFault{kind: kind, node: f.Node, op: op(f)}, nil
	}
}

func init() {
	for kind, op := range map[string]target.ProcessOp{
		"crash-etcd": target.CrashEtcd,
		"pause-etcd": target.PauseEtcd,
		"reboot":     target.RebootNode,
		"power-off":  target.PowerOff,
		"wipe-etcd":  target.WipeEtcd,
	} {
		register(kind, processBuilder(kind, func(scenario.Fault) target.ProcessOp { return op }))
	}

	// reset-node: talosctl reset; graceful leaves etcd first, otherwise the member stays behind.
	register("reset-node", processBuilder("reset-node", func(f scenario.Fault) target.ProcessOp {
		if f.Graceful {
			return target.ResetGraceful
		}

		return target.ResetForced
	}))
}
