package stats

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/strictjson"
)

func TestOutcomeKey(t *testing.T) {
	tests := []struct {
		o    Outcome
		want string
	}{
		{Outcome{Verdict: Pass}, "pass"},
		{Outcome{Verdict: Fail}, "fail"},
		{Outcome{Verdict: Fail, Diagnoses: []string{"b", "a", "b"}}, "fail: a, b"},
		{Outcome{Verdict: Error, Diagnoses: []string{"no-target"}}, "error: no-target"},
	}
	for _, tt := range tests {
		if got := tt.o.Key(); got != tt.want {
			t.Errorf("%+v.Key() = %q, want %q", tt.o, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	diags := []string{"kubelet-timeout", "etcd-quorum", "kubelet-timeout"}
	runs := []Run{
		{Seed: 9, Verdict: Fail, Diagnoses: []string{"etcd-quorum"}, DurationMs: 9000, Replay: "replay 9"},
		{Seed: 3, Verdict: Pass, DurationMs: 3000, Replay: "replay 3"},
		{Seed: 7, Verdict: Fail, Diagnoses: diags, DurationMs: 7000, Replay: "replay 7"},
		{Seed: 1, Verdict: Pass, DurationMs: 1000, Replay: "replay 1"},
		{Seed: 5, Verdict: Fail, Diagnoses: []string{"etcd-quorum", "kubelet-timeout"}, DurationMs: 5000, Replay: "replay 5"},
		{Seed: 2, Verdict: Pass, DurationMs: 2000, Replay: "replay 2"},
		{Seed: 4, Verdict: Error, DurationMs: 4000, Replay: "replay 4"},
		{Seed: 8, Verdict: Fail, Diagnoses: []string{"etcd-quorum"}, DurationMs: 8000, Replay: "replay 8"},
		{Seed: 6, Verdict: Pass, DurationMs: 6000, Replay: "replay 6"},
		{Seed: 10, Verdict: Error, DurationMs: 10000, Replay: "replay 10"},
	}

	got := Summarize("boot", runs)

	lo, hi := Wilson(4, 10)
	want := Summary{
		Scenario: "boot", Runs: 10, Passed: 4, Rate: 0.4, Low: lo, High: hi,
		P50Ms: 5000, P95Ms: 10000,
		Outcomes: []Outcome{
			{Verdict: Pass, Seeds: []int64{1, 2, 3, 6}, Replay: "replay 1"},
			// Two outcomes of two runs each: ordered by key.
			{Verdict: Error, Seeds: []int64{4, 10}, Replay: "replay 4"},
			{Verdict: Fail, Diagnoses: []string{"etcd-quorum"}, Seeds: []int64{8, 9}, Replay: "replay 8"},
			// Same codes in another order, duplicated: one outcome.
			{Verdict: Fail, Diagnoses: []string{"etcd-quorum", "kubelet-timeout"}, Seeds: []int64{5, 7}, Replay: "replay 5"},
		},
	}

	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Summarize:\n got  %+v\n want %+v", got, want)
	}

	if !reflect.DeepEqual(diags, []string{"kubelet-timeout", "etcd-quorum", "kubelet-timeout"}) {
		t.Errorf("Summarize modified a run's diagnoses: %v", diags)
	}
}

// A run voided by a stall of the host is counted, but not in the rate, its
// interval or the percentiles: a runner that stood still says nothing of
// the scenario.
func TestSummarizeVoid(t *testing.T) {
	runs := []Run{
		{Seed: 1, Verdict: Pass, DurationMs: 1000},
		{Seed: 2, Verdict: Void, DurationMs: 900_000, Diagnoses: []string{"learner-not-promoted"}},
		{Seed: 3, Verdict: Fail, DurationMs: 3000},
		{Seed: 4, Verdict: Pass, DurationMs: 2000},
		{Seed: 5, Verdict: Void, DurationMs: 800_000, Diagnoses: []string{"learner-not-promoted"}},
	}

	got := Summarize("boot", runs)

	lo, hi := Wilson(2, 3)
	want := Summary{
		Scenario: "boot", Runs: 5, Passed: 2, Void: 2, Rate: 2.0 / 3, Low: lo, High: hi,
		P50Ms: 2000, P95Ms: 3000,
		Outcomes: []Outcome{
			{Verdict: Pass, Seeds: []int64{1, 4}},
			{Verdict: Void, Diagnoses: []string{"learner-not-promoted"}, Seeds: []int64{2, 5}},
			{Verdict: Fail, Seeds: []int64{3}},
		},
	}

	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Summarize:\n got  %+v\n want %+v", got, want)
	}

	if got.Judged() != 3 {
		t.Errorf("Judged() = %d, want 3", got.Judged())
	}

	// A ledger of it reads back.
	var p strictjson.Problems
	got.check(&p, "s")

	if errs := p.Errs(); len(errs) > 0 {
		t.Errorf("the summary does not validate: %v", errs)
	}

	// Every run void: no rate, an interval of everything.
	all := Summarize("boot", runs[1:2])
	if all.Runs != 1 || all.Void != 1 || all.Judged() != 0 || all.Rate != 0 || all.Low != 0 || all.High != 1 || all.P50Ms != 0 {
		t.Errorf("Summarize(one void run) = %+v", all)
	}
}

// A pass with a fault that never struck counts in the rate and in
// Unstruck; a failure with one does not count there (it says something).
func TestSummarizeUnstruck(t *testing.T) {
	runs := []Run{
		{Seed: 1, Verdict: Pass, DurationMs: 1000, Unfired: []string{"cp1-off"}},
		{Seed: 2, Verdict: Pass, DurationMs: 1000},
		{Seed: 3, Verdict: Fail, DurationMs: 1000, Unfired: []string{"cp1-off"}},
		{Seed: 4, Verdict: Pass, DurationMs: 1000, Unfired: []string{"cp1-off", "cp2-off"}},
	}

	got := Summarize("vip", runs)
	if got.Passed != 3 || got.Unstruck != 2 || got.Rate != 0.75 {
		t.Errorf("Summarize = passed %d, unstruck %d, rate %v; want 3, 2, 0.75", got.Passed, got.Unstruck, got.Rate)
	}

	edited := got
	edited.Unstruck = 1

	if at, _, _ := edited.Mismatch(got, "summary"); at != "summary.unstruck" {
		t.Errorf("Mismatch of an edited unstruck count is at %q, want summary.unstruck", at)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	got := Summarize("idle", nil)
	if got.Runs != 0 || got.Passed != 0 || got.Rate != 0 || got.Low != 0 || got.High != 1 || got.P50Ms != 0 {
		t.Errorf("Summarize(nil) = %+v", got)
	}

	// An empty sample still marshals outcomes as a list, not null.
	data, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(string(data), `"outcomes":[]`) {
		t.Errorf("empty summary JSON = %s, want \"outcomes\":[]", data)
	}
}
