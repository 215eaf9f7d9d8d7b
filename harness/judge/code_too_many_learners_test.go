package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// A learner removed to free the slot (the resilient orchestrator's remedy)
// held it for good, even when its node joins again as another member and
// that member is promoted before the refused node gets in: the node's first
// stint ends at the removal, not at the later member's promotion. A learner
// promoted while another node waits is a queue, not a stuck slot.
func TestTooManyLearnersStints(t *testing.T) {
	ok := running(true, "")
	cp1v := member(1, "cp1", cp1, false)
	refused := machinedLine(3000, "cp3", "retrying error: error adding member: "+errTooManyLearners)
	final := func(ms int64, members ...history.Member) []history.Entry {
		return []history.Entry{
			observed(ms, "cp1", history.ModeConfigured, ok, members, true),
			observed(ms, "cp2", history.ModeConfigured, ok, members, true),
			observed(ms, "cp3", history.ModeConfigured, ok, members, true),
		}
	}

	for _, tc := range []struct {
		name    string
		entries []history.Entry
		want    bool
		end     int64 // cp2's first stint's end, ms
		promo   bool
	}{
		{"removed, joined again, promoted before cp3 got in", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v}, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, true)}, false),
			observed(14000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, false)}, false),
			observed(16000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, true)}, false),
		}, final(17000, cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, false))...), true, 11000, false},
		{"removed, cp3 got in first", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v}, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(5, "cp3", cp3, true)}, false),
			observed(14000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(5, "cp3", cp3, false), member(4, "cp2", cp2, true)}, false),
		}, final(17000, cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, false))...), true, 11000, false},
		{"removed, seen gone once cp2's own view is gone too", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			observed(2000, "cp2", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v}, false),
			observed(11500, "cp2", history.ModeMaintenance, nil, nil, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, true)}, false),
			observed(14000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, false)}, false),
		}, final(17000, cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, false))...), true, 11500, false},
		{"promoted: a queue", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, false)}, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, false), member(5, "cp3", cp3, true)}, false),
		}, final(17000, cp1v, member(2, "cp2", cp2, false), member(5, "cp3", cp3, false))...), false, 11000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := FromHistory(threeNodes(60, tc.entries...), Options{})

			end, promoted, ended := ev.StintEnd("cp2")
			if !ended || end.Milliseconds() != tc.end || promoted != tc.promo {
				t.Errorf("cp2's first stint ended %v at %v, promoted %v; want at %dms, promoted %v", ended, end, promoted, tc.end, tc.promo)
			}

			got := codeFunc("too-many-learners")(ev)
			if (len(got) == 1 && got[0].Node == "cp3") != tc.want || len(got) > 1 {
				t.Fatalf("diagnoses %+v, want one on cp3: %v", got, tc.want)
			}

			if tc.want && !strings.Contains(got[0].Evidence, errTooManyLearners) {
				t.Errorf("evidence %q", got[0].Evidence)
			}
		})
	}
}
