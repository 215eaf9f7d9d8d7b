package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/apifault"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// apiFault intercepts one RPC on one node.
type apiFault struct {
	kind string
	node string
	f    target.APIFault
}

func (a *apiFault) Kind() string             { return a.kind }
func (a *apiFault) Node() string             { return a.node }
func (a *apiFault) Needs() target.Capability { return target.API }

func (a *apiFault) Inject(ctx context.Context, c target.Cluster) (target.Heal, error) {
	af, ok := c.(target.APIFaults)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot intercept API calls")
	}

	return af.InterceptAPI(ctx, a.node, a.f)
}

func apiBuilder(kind string, mode target.APIFaultMode) builder {
	return func(sc *scenario.Scenario, f scenario.Fault) (Fault, error) {
		if f.Node == "" {
			return nil, f.Errorf(sc, "node", "%s needs a node", kind)
		}

		if !slices.Contains(apifault.RPCs, f.RPC) {
			return nil, f.Errorf(sc, "rpc", "%s needs an rpc: one of %s", kind, strings.Join(apifault.RPCs, ", "))
		}

		af := target.APIFault{RPC: f.RPC, Mode: mode, Count: f.Count}

		switch mode {
		case target.APIFail:
			if f.Code == "" {
				return nil, f.Errorf(sc, "code", "%s needs a gRPC code, e.g. Unavailable", kind)
			}

			if _, ok := apifault.CodeByName(f.Code); !ok {
				return nil, f.Errorf(sc, "code", "unknown gRPC code %q", f.Code)
			}

			af.Code = f.Code
		case target.APIDelay:
			if f.Delay.Duration <= 0 {
				return nil, f.Errorf(sc, "delay", "%s needs a positive delay", kind)
			}

			af.Delay = f.Delay.Real(sc.TimeScale)
		case target.APIDropReply:
		}

		return &apiFault{kind: kind, node: f.Node, f: af}, nil
	}
}

func init() {
	register("api-fail", apiBuilder("api-fail", target.APIFail))
	register("api-drop-reply", apiBuilder("api-drop-reply", target.APIDropReply))
	register("api-delay", apiBuilder("api-delay", target.APIDelay))
}
