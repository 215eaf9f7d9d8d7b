package chaos

// Voter is the trigger state "voter": the node is a voting etcd member.
type Voter struct{ isState }

var _ = registerState(Voter{})

func (Voter) Name() string { return "voter" }
func (Voter) Doc() string  { return "the node is a voting etcd member" }

func (Voter) Describe(node string, _ int) string { return node + " is voter" }

func (Voter) Holds(v View, node string, _ int) bool {
	m, ok := member(v, node)

	return ok && !m.IsLearner
}
