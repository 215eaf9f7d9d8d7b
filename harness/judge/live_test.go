package judge_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/scenario"
)

// A run of learner-not-synced (seed 1) as it was recorded: its faults heal
// on cp2's fifth refused promotion, a count the triggers read while the run
// goes on and the judge reads afterwards.
func recordedHistory(t *testing.T) history.History {
	t.Helper()

	data, err := os.ReadFile("testdata/learner-not-synced-history.json")
	if err != nil {
		t.Fatal(err)
	}

	var h history.History
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}

	return h
}

// The trigger state at each entry of a recorded history, read from the fold
// as it goes (what a run's triggers read), equals what the judge's evidence
// of the history up to that entry says.
func TestTriggersReadTheJudgesEvidence(t *testing.T) {
	h := recordedHistory(t)
	live := judge.NewEvidence(h, judge.Options{})

	maxRefusals, fired := 0, 0

	for i, e := range h.Entries {
		live.Apply(e)

		prefix := h
		prefix.Entries = h.Entries[:i+1]
		judged := judge.FromHistory(prefix, judge.Options{})

		lv := chaos.View{Obs: live.Current(), PromoteRefusals: live.PromoteRefusals}
		jv := chaos.View{Obs: judged.Current(), PromoteRefusals: judged.PromoteRefusals}

		for _, n := range h.Nodes {
			if a, b := live.PromoteRefusals(n.Name), judged.PromoteRefusals(n.Name); a != b {
				t.Fatalf("entry %d: %s's refusals %d live, %d judged", i, n.Name, a, b)
			}

			maxRefusals = max(maxRefusals, live.PromoteRefusals(n.Name))

			for _, s := range chaos.StateNames() {
				for count := 1; count <= 6; count++ {
					w := scenario.When{Node: n.Name, State: s, Count: count}
					if a, b := chaos.Holds(lv, w), chaos.Holds(jv, w); a != b {
						t.Fatalf("entry %d: %s %s x%d holds %v live, %v judged", i, n.Name, s, count, a, b)
					}

					if s == "promote-refused" && count == 5 && chaos.Holds(lv, w) {
						fired++
					}
				}
			}
		}

		if a, b := len(live.Changes), len(judged.Changes); a != b {
			t.Fatalf("entry %d: %d mode changes live, %d judged", i, a, b)
		}
	}

	// The history exercises what it is here for.
	if maxRefusals < 5 || fired == 0 {
		t.Fatalf("the recorded run shows at most %d refusals; its trigger waited for 5", maxRefusals)
	}

	// And the verdict's evidence is the fold's.
	whole := judge.FromHistory(h, judge.Options{})
	for _, n := range h.Nodes {
		if a, b := live.PromoteRefusals(n.Name), whole.PromoteRefusals(n.Name); a != b {
			t.Errorf("%s: %d refusals folded, %d judged", n.Name, a, b)
		}
	}
}
