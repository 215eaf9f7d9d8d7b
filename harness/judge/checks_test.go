package judge

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
)

func ptr[T any](v T) *T { return &v }

func TestChecks(t *testing.T) {
	stuck := result.Outcome{Voters: 1, Learners: 1, NodesInMaintenance: []string{}}
	diags := []result.Diagnosis{{Code: "too-many-learners", Node: "cp3"}, {Code: "learner-not-promoted", Node: "cp2"}}

	for _, tc := range []struct {
		name   string
		exp    scenario.Expect
		out    result.Outcome
		diags  []result.Diagnosis
		failed []string
	}{
		{"all hold", scenario.Expect{Converged: ptr(false), Voters: ptr(1), Learners: ptr(1), NodesInMaintenance: []string{},
			Diagnoses: []scenario.ExpectedDiagnosis{{Code: "too-many-learners", Node: "cp3"}, {Code: "learner-not-promoted"}}}, stuck, diags, nil},
		{"voters differ", scenario.Expect{Voters: ptr(3)}, stuck, diags, []string{"voters"}},
		{"diagnosis on the wrong node", scenario.Expect{Diagnoses: []scenario.ExpectedDiagnosis{{Code: "too-many-learners", Node: "cp2"}}}, stuck, diags,
			[]string{"diagnosis too-many-learners on cp2"}},
		{"forbidden diagnosis present", scenario.Expect{NoDiagnoses: []string{"learner-not-promoted"}}, stuck, diags, []string{"no diagnosis learner-not-promoted"}},
		{"maintenance set compared as a set", scenario.Expect{NodesInMaintenance: []string{"w1", "cp2"}},
			result.Outcome{NodesInMaintenance: []string{"cp2", "w1"}}, nil, nil},
		{"shared IP held as expected", scenario.Expect{SharedIP: "held"},
			result.Outcome{SharedIP: &result.SharedIP{Address: "10.5.0.10", Holder: "cp2"}}, nil, nil},
		{"shared IP unheld where held was expected", scenario.Expect{SharedIP: "held"},
			result.Outcome{SharedIP: &result.SharedIP{Address: "10.5.0.10"}}, nil, []string{"sharedIP"}},
		{"shared IP held but not answering", scenario.Expect{SharedIP: "held"},
			result.Outcome{SharedIP: &result.SharedIP{Address: "10.5.0.10", Holder: "cp2", Error: "connect: no route to host"}}, nil, []string{"sharedIP"}},
		{"no shared IP at all", scenario.Expect{SharedIP: "unheld"}, result.Outcome{}, nil, []string{"sharedIP"}},
		{"empty expectation list means none in maintenance", scenario.Expect{NodesInMaintenance: []string{}},
			result.Outcome{NodesInMaintenance: []string{"cp2"}}, nil, []string{"nodesInMaintenance"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var failed []string

			for _, c := range Checks(tc.exp, tc.out, tc.diags, clock.Real) {
				if !c.Passed {
					failed = append(failed, c.Name)
				}
			}

			if len(failed) != len(tc.failed) {
				t.Fatalf("failed %v, want %v", failed, tc.failed)
			}

			for i := range failed {
				if failed[i] != tc.failed[i] {
					t.Fatalf("failed %v, want %v", failed, tc.failed)
				}
			}
		})
	}
}

func TestJudgePromotions(t *testing.T) {
	out := result.Outcome{Promotions: []result.Promotion{
		{Node: "cp2", LearnerMs: 1000, PromotedMs: 1700}, // 0.7 s × 60 = 42 s
		{Node: "cp3", LearnerMs: 2000, PromotedMs: -1},
	}}

	for _, tc := range []struct {
		name   string
		want   scenario.ExpectedPromotion
		passed bool
		actual string
	}{
		{"slow enough", scenario.ExpectedPromotion{Node: "cp2", AtLeast: scenario.Duration{Duration: 30 * time.Second}}, true, "42s"},
		{"too slow", scenario.ExpectedPromotion{Node: "cp2", AtMost: scenario.Duration{Duration: 20 * time.Second}}, false, "42s"},
		{"never promoted", scenario.ExpectedPromotion{Node: "cp3"}, false, "never promoted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := Checks(scenario.Expect{Promotions: []scenario.ExpectedPromotion{tc.want}}, out, nil, clock.New(60))
			if len(checks) != 1 || checks[0].Passed != tc.passed || checks[0].Actual != tc.actual {
				t.Fatalf("checks %+v, want passed=%v actual=%q", checks, tc.passed, tc.actual)
			}
		})
	}
}
