package chaos

// Member is the trigger state "member": the node is in the etcd member list, as a learner or a voter.
type Member struct{ isState }

var _ = registerState(Member{})

func (Member) Name() string { return "member" }
func (Member) Doc() string  { return "the node is in the etcd member list, as a learner or a voter" }

func (Member) Describe(node string, _ int) string { return node + " is member" }

func (Member) Holds(v View, node string, _ int) bool {
	_, ok := member(v, node)

	return ok
}
