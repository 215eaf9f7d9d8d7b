package simtest_test

import (
	"testing"

	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/sim/simtest"
)

// UnlessVoid runs again while the run is voided, at most VoidRuns times,
// and stops at the first run that is not.
func TestUnlessVoid(t *testing.T) {
	voided := &result.Result{Verdict: result.Error, Error: "the host did not run talchaos", Voided: true}
	failed := &result.Result{Verdict: result.Fail}

	for _, tc := range []struct {
		name  string
		runs  []*result.Result
		calls int
		want  *result.Result
	}{
		{"a failure is kept", []*result.Result{failed}, 1, failed},
		{"a harness error is kept", []*result.Result{nil}, 1, nil},
		{"voided, then failed", []*result.Result{voided, failed}, 2, failed},
		{"voided every time", []*result.Result{voided, voided, voided, failed}, simtest.VoidRuns, voided},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, notes := 0, 0

			got := simtest.UnlessVoid(func() *result.Result { calls++; return tc.runs[calls-1] }, func(attempt int, res *result.Result) {
				notes++

				if attempt != notes || !res.Voided {
					t.Errorf("note %d of a run %+v", attempt, res)
				}
			})

			voids := calls - 1 // every run but the last was voided
			if got != nil && got.Voided {
				voids = calls
			}

			if got != tc.want || calls != tc.calls || notes != voids {
				t.Errorf("returned %+v after %d runs and %d notes, want %+v after %d", got, calls, notes, tc.want, tc.calls)
			}
		})
	}
}
