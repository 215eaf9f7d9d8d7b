package chaos

import "github.com/talchaos/talchaos/harness/target"

// Formed is the trigger state "formed": the node is a voting etcd member, and
// every control plane is a voter of the same cluster: the control plane
// formed as a whole, not only as far as one node's join.
type Formed struct{ isState }

var _ = registerState(Formed{})

func (Formed) Name() string { return "formed" }
func (Formed) Doc() string {
	return "the node is a voting etcd member and every control plane is a voter of its cluster"
}

func (Formed) Describe(node string, _ int) string {
	return "the control plane formed (" + node + " a voter)"
}

func (Formed) Holds(v View, node string, _ int) bool {
	for _, c := range v.Obs.Clusters() {
		m, ok := c.MemberOf(v.Obs.Nodes[node])
		if !ok {
			continue
		}

		if m.IsLearner {
			return false
		}

		for _, n := range v.Obs.Nodes {
			if n == nil || n.Role != target.ControlPlane {
				continue
			}

			if m, ok := c.MemberOf(n); !ok || m.IsLearner {
				return false
			}
		}

		return true
	}

	return false
}
