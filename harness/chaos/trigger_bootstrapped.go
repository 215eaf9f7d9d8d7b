package chaos

import "github.com/talchaos/talchaos/harness/history"

// Bootstrapped is the trigger state "bootstrapped": the node's etcd is the first and only member of a new cluster.
type Bootstrapped struct{ isState }

var _ = registerState(Bootstrapped{})

func (Bootstrapped) Name() string { return "bootstrapped" }
func (Bootstrapped) Doc() string {
	return "the node's etcd is the first and only member of a new cluster"
}

func (Bootstrapped) Describe(node string, _ int) string { return node + " is bootstrapped" }

func (Bootstrapped) Holds(v View, node string, _ int) bool {
	n := v.Obs.Nodes[node]

	if n == nil || len(n.Members) != 1 || n.Members[0].IsLearner || n.Members[0].Hostname == "" {
		return false
	}

	// Its own member, started (named): by its etcd's status, peer URL or name.
	_, own := history.Cluster{Members: n.Members}.MemberOf(n)

	return own
}
