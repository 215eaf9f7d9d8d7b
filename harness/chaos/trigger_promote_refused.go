package chaos

import "fmt"

// PromoteRefused is the trigger state "promote-refused": the leader refused
// the node's promotion for the count-th time. etcd logs "rejecting promote
// learner: learner is not ready" once per refused MemberPromote; the line
// names no member, so it counts for the node that is the learner then.
type PromoteRefused struct{}

var _ = registerState(PromoteRefused{})

func (PromoteRefused) Name() string  { return "promote-refused" }
func (PromoteRefused) Counted() bool { return true }
func (PromoteRefused) Doc() string {
	return "the leader refused the node's promotion for the count-th time (default 1)"
}

func (PromoteRefused) Describe(node string, count int) string {
	if count == 1 {
		return node + "'s promotion was refused"
	}

	return fmt.Sprintf("%s's promotion was refused %d times", node, count)
}

func (PromoteRefused) Holds(v View, node string, count int) bool {
	return v.PromoteRefusals != nil && v.PromoteRefusals(node) >= count
}
