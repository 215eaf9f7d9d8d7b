package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
)

// A failing verdict is void (error) when the history records a stall of
// talchaos's own process of a Talos minute or more; a shorter stall, or a
// run whose expectations held, keeps its verdict.
func TestStallVoidsAFailingVerdict(t *testing.T) {
	stall := func(endMs int64, d time.Duration) history.Entry {
		return history.Entry{WallMs: endMs, Stall: &history.Stall{DurationMs: d.Milliseconds()}}
	}

	voters := func(n int) scenario.Expect { return scenario.Expect{Voters: new(n)} }

	// No node ever configured: no voters.
	looks := func(scale float64, extra ...history.Entry) history.History {
		es := []history.Entry{
			observed(1000, "cp1", history.ModeMaintenance, nil, nil, false),
			observed(1000, "cp2", history.ModeMaintenance, nil, nil, false),
			observed(1000, "cp3", history.ModeMaintenance, nil, nil, false),
		}
		es = append(es, extra...)

		for _, n := range []string{"cp1", "cp2", "cp3"} {
			es = append(es, observed(90000, n, history.ModeMaintenance, nil, nil, true))
		}

		return threeNodes(scale, es...)
	}

	for _, tc := range []struct {
		name    string
		h       history.History
		exp     scenario.Expect
		verdict string
		void    []string
	}{
		{"no stall", looks(60), voters(3), result.Fail, nil},
		{"5 s at 60x: 5 Talos minutes", looks(60, stall(20000, 5*time.Second)), voters(3), result.Error,
			[]string{"did not run talchaos for 5s from 15s into the run (5m0s of Talos time at 60x)", "run it again"}},
		{"the longest of two is told", looks(60, stall(20000, 5*time.Second), stall(60000, 30*time.Second)), voters(3), result.Error,
			[]string{"for 30s from 30s into the run (30m0s of Talos time at 60x) (and a shorter stall of a Talos minute or more)"}},
		{"the longest of three is told", looks(60, stall(20000, 5*time.Second), stall(60000, 30*time.Second), stall(70000, 6*time.Second)), voters(3), result.Error,
			[]string{"for 30s from 30s into the run (30m0s of Talos time at 60x) (and 2 shorter stalls of a Talos minute or more)"}},
		{"5 s at real time: 5 Talos seconds", looks(1, stall(20000, 5*time.Second)), voters(3), result.Fail, nil},
		{"70 s at real time", looks(1, stall(80000, 70*time.Second)), voters(3), result.Error,
			[]string{"for 1m10s from 10s into the run (1m10s of Talos time at 1x)"}},
		{"expectations held", looks(60, stall(20000, 5*time.Second)), voters(0), result.Pass, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.h, tc.exp)

			if v.Verdict != tc.verdict {
				t.Fatalf("verdict %s (void %q), want %s", v.Verdict, v.Void, tc.verdict)
			}

			if (v.Void != "") != (tc.verdict == result.Error) {
				t.Fatalf("void %q with verdict %s", v.Void, v.Verdict)
			}

			for _, w := range tc.void {
				if !strings.Contains(v.Void, w) {
					t.Errorf("void %q lacks %q", v.Void, w)
				}
			}

			res := &result.Result{Schema: result.Schema, Scenario: "s", Target: "sim", History: &tc.h}
			v.Apply(res)

			if res.Voided != (tc.verdict == result.Error) || res.Error != v.Void {
				t.Errorf("voided %v, error %q for verdict %s", res.Voided, res.Error, v.Verdict)
			}

			// What the judge sets is what a report read back must hold.
			for _, e := range res.Validate(history.Known{}) {
				if strings.HasPrefix(e.Path, "voided") {
					t.Errorf("the judge's verdict does not validate: %v", e)
				}
			}

			// The checks and diagnoses stay as the history shows them.
			if tc.verdict == result.Error && (len(v.Checks) != 1 || v.Checks[0].Passed) {
				t.Errorf("checks %+v, want the failed voters check", v.Checks)
			}
		})
	}
}
