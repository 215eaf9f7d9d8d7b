package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
)

// A fault that could not be injected or healed makes the verdict error,
// whether the expectations held or not, saying which fault and why; it is
// not a void run (hunt and nightly count it an error).
func TestFaultFailureIsAnError(t *testing.T) {
	fault := func(ms int64, phase, err string) history.Entry {
		return history.Entry{WallMs: ms, Fault: &history.FaultEvent{Name: "cp2-off", Kind: "power-off", Phase: phase, Nodes: []string{"cp2"}, Error: err}}
	}

	// No node ever configured: no voters.
	looks := func(extra ...history.Entry) history.History {
		es := []history.Entry{}
		for _, n := range []string{"cp1", "cp2", "cp3"} {
			es = append(es, observed(1000, n, history.ModeMaintenance, nil, nil, false))
		}

		es = append(es, extra...)

		for _, n := range []string{"cp1", "cp2", "cp3"} {
			es = append(es, observed(90000, n, history.ModeMaintenance, nil, nil, true))
		}

		return threeNodes(60, es...)
	}

	held, failed := scenario.Expect{Voters: new(0)}, scenario.Expect{Voters: new(3)}

	for _, tc := range []struct {
		name    string
		h       history.History
		exp     scenario.Expect
		verdict string
		err     []string
	}{
		{"started and healed", looks(fault(2000, history.FaultStarted, ""), fault(3000, history.FaultStopped, "")), held, result.Pass, nil},
		{"started and healed, expectations failed", looks(fault(2000, history.FaultStarted, "")), failed, result.Fail, nil},
		{"not injected, expectations held", looks(fault(2000, history.FaultFailed, "cp2 did not answer")), held, result.Error,
			[]string{`fault "cp2-off" (power-off) could not be injected: cp2 did not answer;`, "says nothing of the cluster"}},
		{"not injected, expectations failed", looks(fault(2000, history.FaultFailed, "cp2 did not answer")), failed, result.Error,
			[]string{`could not be injected: cp2 did not answer`}},
		{"not healed", looks(fault(2000, history.FaultStarted, ""), fault(3000, history.FaultFailed, "heal: no route")), held, result.Error,
			[]string{`fault "cp2-off" (power-off) could not be healed: no route;`}},
		{"the first of three is told", looks(fault(2000, history.FaultFailed, "a"), fault(2500, history.FaultFailed, "b"), fault(3000, history.FaultFailed, "c")), held, result.Error,
			[]string{`could not be injected: a (and 2 more faults failed);`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.h, tc.exp)

			if v.Verdict != tc.verdict || v.Void != "" {
				t.Fatalf("verdict %s (error %q, void %q), want %s", v.Verdict, v.Error, v.Void, tc.verdict)
			}

			if (v.Error != "") != (tc.verdict == result.Error) {
				t.Fatalf("error %q with verdict %s", v.Error, v.Verdict)
			}

			for _, w := range tc.err {
				if !strings.Contains(v.Error, w) {
					t.Errorf("error %q lacks %q", v.Error, w)
				}
			}

			res := &result.Result{Schema: result.Schema, Scenario: "s", Target: "sim", History: &tc.h, Error: "stale"}
			v.Apply(res)

			if res.Voided || res.Error != v.Error {
				t.Errorf("voided %v, error %q for verdict %s", res.Voided, res.Error, v.Verdict)
			}
		})
	}
}
