package stats

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/strictjson"
)

// Verdicts of a run, the same words as report.json's verdict, and Void.
const (
	Pass  = "pass"
	Fail  = "fail"
	Error = "error"
	// Void is a run whose report says error because its expectations
	// failed across a stall of the host that ran it (report.json's voided):
	// it says nothing of the scenario, so a rate leaves it out.
	Void = "void"
)

// Verdicts are the verdicts a run can have, and VerdictList says them for an
// error message.
var Verdicts = []string{Pass, Fail, Error, Void}

// VerdictList is Verdicts as a message lists them.
const VerdictList = Pass + ", " + Fail + ", " + Error + " or " + Void

// Run is one run of a scenario at one seed: the sample Summarize aggregates.
type Run struct {
	Seed       int64    `json:"seed"`
	Verdict    string   `json:"verdict"`             // Pass, Fail, Error or Void
	Diagnoses  []string `json:"diagnoses,omitempty"` // diagnosis codes, any order
	DurationMs int64    `json:"durationMs"`
	Replay     string   `json:"replay,omitempty"` // command that reproduces this run
	// Unfired names the run's faults that never struck (their trigger never
	// held): a pass with one says nothing of that fault.
	Unfired []string `json:"unfired,omitempty"`
}

// Outcome is one distinct way a scenario ended, with every seed that ended
// that way. Grouping by outcome turns "7 failures" into "5 × etcd-quorum-lost,
// 2 × kubelet-timeout", and the seeds make each one reproducible.
type Outcome struct {
	Verdict   string   `json:"verdict"`
	Diagnoses []string `json:"diagnoses,omitempty"` // sorted, deduplicated codes
	Seeds     []int64  `json:"seeds"`               // ascending
	Replay    string   `json:"replay,omitempty"`    // reproduces Seeds[0]
}

// Key identifies the outcome: the verdict alone ("pass") or followed by its
// diagnosis codes ("fail: code1, code2"). Codes are sorted and deduplicated
// first, so the same failure seen in a different order is the same outcome.
func (o Outcome) Key() string {
	codes := normalizeCodes(o.Diagnoses)
	if len(codes) == 0 {
		return o.Verdict
	}

	return o.Verdict + ": " + strings.Join(codes, ", ")
}

// Summary is the aggregate of a scenario's runs: what a nightly ledger
// stores per scenario and what Compare tests.
type Summary struct {
	Scenario string `json:"scenario"`
	Runs     int    `json:"runs"`
	Passed   int    `json:"passed"`
	// Void is how many of the runs were voided by a stall of the host
	// (verdict Void): the rate, its interval and the percentiles are of the
	// other runs (Judged), and Compare tests those.
	Void int `json:"void,omitempty"`
	// Unstruck is how many of the passes had a fault that never struck
	// (Run.Unfired): passes that say nothing of that fault. They stay in
	// the rate (the run's expectations held); a night whose passes grow
	// hollow shows here, not as a regression.
	Unstruck int       `json:"unstruck,omitempty"`
	Rate     float64   `json:"rate"`     // Passed/Judged, 0 with no judged runs
	Low      float64   `json:"rateLow"`  // Wilson 95 % interval of Rate:
	High     float64   `json:"rateHigh"` // [Low, High]
	P50Ms    int64     `json:"p50Ms"`    // median duration (nearest rank)
	P95Ms    int64     `json:"p95Ms"`    // 95th percentile duration
	Outcomes []Outcome `json:"outcomes"` // most frequent first, then by Key
}

// Judged is how many runs the rate is of: the runs not voided.
func (s Summary) Judged() int { return s.Runs - s.Void }

// Summarize aggregates runs of one scenario. Only Pass counts as passed:
// Error (the harness could not run) and any unknown verdict count as runs
// that did not pass, because a nightly that cannot bootstrap is not healthy
// either. Void runs (the host stalled) are counted in Void and left out of
// the rate and the percentiles: a runner that stood still says nothing of
// the scenario, and would otherwise read as a regression. Outcomes are grouped by Key and ordered by count descending, then
// Key, so the commonest failure is read first and the order is stable from
// night to night. An outcome's Replay is that of its lowest seed.
func Summarize(scenario string, runs []Run) Summary {
	s := Summary{Scenario: scenario, Runs: len(runs), Outcomes: []Outcome{}}

	type group struct {
		out    Outcome
		replay int64 // seed whose Replay out.Replay holds
	}

	groups := map[string]*group{}
	durations := make([]time.Duration, 0, len(runs))

	for _, r := range runs {
		switch r.Verdict {
		case Pass:
			s.Passed++

			if len(r.Unfired) > 0 {
				s.Unstruck++
			}
		case Void:
			s.Void++
		}

		if r.Verdict != Void {
			durations = append(durations, time.Duration(r.DurationMs)*time.Millisecond)
		}

		o := Outcome{Verdict: r.Verdict, Diagnoses: normalizeCodes(r.Diagnoses)}
		key := o.Key()

		g, ok := groups[key]
		if !ok {
			g = &group{out: o, replay: r.Seed}
			g.out.Replay = r.Replay
			groups[key] = g
		} else if r.Seed < g.replay {
			g.replay, g.out.Replay = r.Seed, r.Replay
		}

		g.out.Seeds = append(g.out.Seeds, r.Seed)
	}

	s.Rate = s.rate()
	s.Low, s.High = Wilson(s.Passed, s.Judged())
	s.P50Ms = Percentile(durations, 50).Milliseconds()
	s.P95Ms = Percentile(durations, 95).Milliseconds()

	for _, g := range groups {
		slices.Sort(g.out.Seeds)
		s.Outcomes = append(s.Outcomes, g.out)
	}

	slices.SortFunc(s.Outcomes, func(a, b Outcome) int {
		if c := cmp.Compare(len(b.Seeds), len(a.Seeds)); c != 0 {
			return c
		}

		return strings.Compare(a.Key(), b.Key())
	})

	return s
}

// rate is Passed/Judged, 0 with no judged runs.
func (s Summary) rate() float64 {
	if s.Judged() <= 0 {
		return 0
	}

	return float64(s.Passed) / float64(s.Judged())
}

// normalizeCodes returns codes sorted and deduplicated, as a new slice (nil
// when there are none) so the caller's Run is left untouched.
func normalizeCodes(codes []string) []string {
	if len(codes) == 0 {
		return nil
	}

	out := slices.Clone(codes)
	slices.Sort(out)

	return slices.Compact(out)
}

// Mismatch names the first field in which s, the summary at path in a
// file, differs from want: the field's path ("" when they are the same) and
// both values as text. A reader of a file holding a summary and the runs it
// was made of (hunt.json, a shard's ledger beside its hunts) checks the one
// against Summarize of the other with it, so that a hand-edited count is
// refused, not merged.
func (s Summary) Mismatch(want Summary, path string) (at, got, wanted string) {
	for _, f := range []struct {
		key  string
		a, b any
	}{
		{"scenario", s.Scenario, want.Scenario}, {"runs", s.Runs, want.Runs}, {"passed", s.Passed, want.Passed}, {"void", s.Void, want.Void},
		{"unstruck", s.Unstruck, want.Unstruck},
		{"rate", s.Rate, want.Rate}, {"rateLow", s.Low, want.Low}, {"rateHigh", s.High, want.High},
		{"p50Ms", s.P50Ms, want.P50Ms}, {"p95Ms", s.P95Ms, want.P95Ms},
	} {
		if f.a != f.b {
			return strictjson.Key(path, f.key), fmt.Sprint(f.a), fmt.Sprint(f.b)
		}
	}

	outcomes := strictjson.Key(path, "outcomes")
	if len(s.Outcomes) != len(want.Outcomes) {
		return outcomes, fmt.Sprintf("%d outcome(s)", len(s.Outcomes)), fmt.Sprint(len(want.Outcomes))
	}

	for i, o := range s.Outcomes {
		w, op := want.Outcomes[i], strictjson.Index(outcomes, i)

		switch {
		case o.Key() != w.Key():
			return op, strictjson.Quote(o.Key()), strictjson.Quote(w.Key())
		case !slices.Equal(o.Seeds, w.Seeds):
			return strictjson.Key(op, "seeds"), fmt.Sprint(o.Seeds), fmt.Sprint(w.Seeds)
		case o.Replay != w.Replay:
			return strictjson.Key(op, "replay"), strictjson.Quote(o.Replay), strictjson.Quote(w.Replay)
		}
	}

	return "", "", ""
}
