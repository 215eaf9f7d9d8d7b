package judge

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// A learner removed to free the slot (the resilient orchestrator's remedy)
// held it for good, even when its node joins again as another member and
// that member is promoted before the refused node gets in: the node's first
// stint ends at the removal, not at the later member's promotion. A learner
// promoted while another node waits is a queue, not a stuck slot. The
// outcome has a promotions row for each of cp2's members.
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
		// cp2's rows in the outcome's promotions: member, learner,
		// promoted, removed (ms).
		rows []string
	}{
		{"removed, joined again, promoted before cp3 got in", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v}, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, true)}, false),
			observed(14000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, false)}, false),
			observed(16000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, true)}, false),
		}, final(17000, cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, false))...), true, 11000, false,
			[]string{"0000000000000002 1000 -1 11000", "0000000000000004 12000 14000 0"}},
		{"removed, cp3 got in first", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v}, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(5, "cp3", cp3, true)}, false),
			observed(14000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(5, "cp3", cp3, false), member(4, "cp2", cp2, true)}, false),
		}, final(17000, cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, false))...), true, 11000, false,
			[]string{"0000000000000002 1000 -1 11000", "0000000000000004 14000 17000 0"}},
		{"removed, seen gone once cp2's own view is gone too", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			observed(2000, "cp2", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v}, false),
			observed(11500, "cp2", history.ModeMaintenance, nil, nil, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, true)}, false),
			observed(14000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(4, "cp2", cp2, false)}, false),
		}, final(17000, cp1v, member(4, "cp2", cp2, false), member(5, "cp3", cp3, false))...), true, 11500, false,
			[]string{"0000000000000002 1000 -1 11500", "0000000000000004 12000 14000 0"}},
		{"promoted: a queue", append([]history.Entry{
			observed(1000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, true)}, false),
			refused,
			observed(11000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, false)}, false),
			observed(12000, "cp1", history.ModeConfigured, ok, []history.Member{cp1v, member(2, "cp2", cp2, false), member(5, "cp3", cp3, true)}, false),
		}, final(17000, cp1v, member(2, "cp2", cp2, false), member(5, "cp3", cp3, false))...), false, 11000, true,
			[]string{"0000000000000002 1000 11000 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := FromHistory(threeNodes(60, tc.entries...), Options{})

			end, promoted, ended := ev.StintEnd("cp2")
			if !ended || end.Milliseconds() != tc.end || promoted != tc.promo {
				t.Errorf("cp2's first stint ended %v at %v, promoted %v; want at %dms, promoted %v", ended, end, promoted, tc.end, tc.promo)
			}

			var rows []string

			for _, p := range outcome(ev).Promotions {
				if p.Node == "cp2" {
					rows = append(rows, fmt.Sprintf("%s %d %d %d", p.Member, p.LearnerMs, p.PromotedMs, p.RemovedMs))
				}
			}

			if !slices.Equal(rows, tc.rows) {
				t.Errorf("cp2's promotions %q, want %q", rows, tc.rows)
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
