package chaos

// Learner is the trigger state "learner": the node is an etcd learner.
type Learner struct{ isState }

var _ = registerState(Learner{})

func (Learner) Name() string { return "learner" }
func (Learner) Doc() string  { return "the node is an etcd learner" }

func (Learner) Describe(node string, _ int) string { return node + " is learner" }

func (Learner) Holds(v View, node string, _ int) bool {
	m, ok := member(v, node)

	return ok && m.IsLearner
}
