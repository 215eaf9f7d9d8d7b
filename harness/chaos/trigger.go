package chaos

import (
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/scenario"
)

// TriggerState is one state a fault's `when:` or `until:` trigger can wait
// for, one type per state in one file (trigger_<state>.go) that registers
// it, as the fault kinds are one type per kind: adding a state touches that
// file and its test, nothing else. The scenario validator (Catalogue),
// history validation, the schedule and `talchaos faults` read the one list,
// TriggerStates.
type TriggerState interface {
	// Name is the state as scenarios name it ("learner").
	Name() string
	// Doc says in one line when a node is in the state.
	Doc() string
	// Counted reports whether the state takes a count (the k-th time it
	// happened); the others hold or do not.
	Counted() bool
	// Holds reports whether node is in the state in v, at least count times
	// for a counted state.
	Holds(v View, node string, count int) bool
	// Describe says what a trigger on node waits for, for people.
	Describe(node string, count int) string
}

// View is what triggers read: the latest look at every node, and how often
// the leader refused each node's promotion while it was a learner.
type View struct {
	Obs             *history.Observation
	PromoteRefusals func(node string) int
}

// states is filled as the package is initialised, by the states' files; it
// is read only through TriggerStates, never during initialisation.
var states []TriggerState

// registerState adds a state to the list; each state's file calls it once.
func registerState(s TriggerState) TriggerState {
	states = append(states, s)

	return s
}

// TriggerStates is every trigger state, by name.
func TriggerStates() []TriggerState {
	return slices.SortedFunc(slices.Values(states), func(a, b TriggerState) int { return strings.Compare(a.Name(), b.Name()) })
}

// LookupState finds a trigger state by name.
func LookupState(name string) (TriggerState, bool) {
	i := slices.IndexFunc(TriggerStates(), func(s TriggerState) bool { return s.Name() == name })
	if i < 0 {
		return nil, false
	}

	return TriggerStates()[i], true
}

// StateNames lists the trigger states' names, sorted.
func StateNames() []string {
	out := make([]string, 0, len(TriggerStates()))
	for _, s := range TriggerStates() {
		out = append(out, s.Name())
	}

	return out
}

// Holds reports whether the trigger's node is in its state in v.
func Holds(v View, w scenario.When) bool {
	s, ok := LookupState(w.State)

	return ok && v.Obs != nil && v.Obs.Nodes[w.Node] != nil && s.Holds(v, w.Node, w.Times())
}

// describe says what a trigger waits for: "cp2 is learner",
// "cp2's promotion was refused 3 times".
func describe(w scenario.When) string {
	if s, ok := LookupState(w.State); ok {
		return s.Describe(w.Node, w.Times())
	}

	return w.Node + " is " + w.State
}

// isState is a state that holds or does not, described as "cp2 is learner".
type isState struct{}

func (isState) Counted() bool { return false }

// member finds node's member in the clusters of an observation.
func member(v View, node string) (history.Member, bool) {
	n := v.Obs.Nodes[node]

	for _, c := range v.Obs.Clusters() {
		if m, ok := c.MemberOf(n); ok {
			return m, true
		}
	}

	return history.Member{}, false
}
