package stats

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Verdicts of a run, the same words as report.json's verdict.
const (
	Pass  = "pass"
	Fail  = "fail"
	Error = "error"
)

// Run is one run of a scenario at one seed: the sample Summarize aggregates.
type Run struct {
	Seed       int64    `json:"seed"`
	Verdict    string   `json:"verdict"`             // Pass, Fail or Error
	Diagnoses  []string `json:"diagnoses,omitempty"` // diagnosis codes, any order
	DurationMs int64    `json:"durationMs"`
	Replay     string   `json:"replay,omitempty"` // command that reproduces this run
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
	Scenario string    `json:"scenario"`
	Runs     int       `json:"runs"`
	Passed   int       `json:"passed"`
	Rate     float64   `json:"rate"`     // Passed/Runs, 0 with no runs
	Low      float64   `json:"rateLow"`  // Wilson 95 % interval of Rate:
	High     float64   `json:"rateHigh"` // [Low, High]
	P50Ms    int64     `json:"p50Ms"`    // median duration (nearest rank)
	P95Ms    int64     `json:"p95Ms"`    // 95th percentile duration
	Outcomes []Outcome `json:"outcomes"` // most frequent first, then by Key
}

// Summarize aggregates runs of one scenario. Only Pass counts as passed:
// Error (the harness could not run) and any unknown verdict count as runs
// that did not pass, because a nightly that cannot bootstrap is not healthy
// either. Outcomes are grouped by Key and ordered by count descending, then
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
		if r.Verdict == Pass {
			s.Passed++
		}

		durations = append(durations, time.Duration(r.DurationMs)*time.Millisecond)

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

	if s.Runs > 0 {
		s.Rate = float64(s.Passed) / float64(s.Runs)
	}

	s.Low, s.High = Wilson(s.Passed, s.Runs)
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
