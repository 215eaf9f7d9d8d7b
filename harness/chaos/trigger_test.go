package chaos

import (
	"slices"
	"testing"

	"github.com/talchaos/talchaos/harness/scenario"
)

func TestTriggerStates(t *testing.T) {
	seen := map[string]bool{}

	for _, s := range TriggerStates() {
		if s.Name() == "" || s.Doc() == "" || seen[s.Name()] {
			t.Errorf("state %q: a state has a name, listed once, and a doc", s.Name())
		}

		seen[s.Name()] = true

		if got := Catalogue.Counted(s.Name()); got != s.Counted() {
			t.Errorf("Catalogue.Counted(%s) = %v, want %v", s.Name(), got, s.Counted())
		}
	}

	// The states scenarios use since talchaos/v1: none may disappear.
	for _, want := range []string{"left-maintenance", "bootstrapped", "member", "learner", "voter", "etcd-running", "promote-refused"} {
		if !seen[want] {
			t.Errorf("trigger state %s is gone", want)
		}
	}

	if !slices.Equal(Catalogue.TriggerStates(), StateNames()) || !slices.IsSorted(StateNames()) {
		t.Errorf("the catalogue's states %v are not the sorted list %v", Catalogue.TriggerStates(), StateNames())
	}

	if !slices.Equal(Known().States, StateNames()) {
		t.Errorf("Known().States = %v", Known().States)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		state string
		count int
		want  string
	}{
		{"learner", 0, "cp2 is learner"},
		{"promote-refused", 0, "cp2's promotion was refused"},
		{"promote-refused", 3, "cp2's promotion was refused 3 times"},
	} {
		if got := describe(whenOf("cp2", tc.state, tc.count)); got != tc.want {
			t.Errorf("describe(%s, %d) = %q, want %q", tc.state, tc.count, got, tc.want)
		}
	}
}

func whenOf(node, state string, count int) scenario.When {
	return scenario.When{Node: node, State: state, Count: count}
}
