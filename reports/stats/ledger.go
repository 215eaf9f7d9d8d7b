package stats

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/inputfile"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/strictjson"
)

// LedgerSchema names the ledger's JSON format. A reader rejects any other
// value instead of guessing, so a format change can never be mistaken for a
// change in reliability.
const LedgerSchema = "talchaos.ledger/v1"

// Ledger is one night's record: a Summary per scenario. Tonight's ledger is
// compared with last night's by Compare, and then becomes the next baseline.
type Ledger struct {
	Schema  string    `json:"schema"` // LedgerSchema; Write sets it
	Created time.Time `json:"created"`
	Tool    string    `json:"tool,omitempty"` // e.g. "talchaos v0.4.1"
	// Shard is set in the ledger of one shard of a night (nightly
	// --shard): which part of which night it holds. talchaos merge
	// combines the shards into the night's ledger, which has none.
	Shard *shard.Stamp `json:"shard,omitempty"`
	// TimeScale is the night's --time-scale, every scenario's (0: each its
	// own): a night at another scale is not compared with this one.
	TimeScale float64   `json:"timeScale,omitempty"`
	Scenarios []Summary `json:"scenarios"` // sorted by Scenario, unique
}

// MaxScenarios bounds the scenarios of a ledger read back (the catalogue
// holds a few dozen).
const MaxScenarios = 10_000

// ReadLedger reads a ledger written by Write. The file is untrusted input (a
// baseline downloaded from CI) and is read as strictly as a scenario: a
// regular file of at most inputfile.MaxLedgerBytes, of schema LedgerSchema
// (any other is refused rather than half-read); an unknown field (a misspelt
// key), a key written twice, a value of the wrong type, a required field left
// out (schema, scenarios; a summary's scenario, runs and passed) or data after
// the JSON value are errors, and so is a ledger that contradicts itself
// (Validate). Every problem is a *strictjson.Error (several:
// strictjson.Errors) naming the file, the line and column and the JSON path,
// since a nightly job juggles two ledgers.
func ReadLedger(path string) (*Ledger, error) {
	data, err := inputfile.Read(path, inputfile.MaxLedgerBytes)
	if err != nil {
		return nil, &strictjson.Error{File: path, Msg: "cannot read the ledger: " + inputfile.Problem(err), Err: err}
	}

	return DecodeLedger(path, data)
}

// DecodeLedger is ReadLedger of a ledger's content; file names it in errors.
func DecodeLedger(file string, data []byte) (*Ledger, error) {
	var l Ledger

	if err := strictjson.Decode(file, data, &l, ledgerOptions); err != nil {
		// A file of another schema (a report, a ledger of another
		// version) fails with that rather than with whatever its shape causes.
		if serr := strictjson.SchemaError(file, data, "a ledger", LedgerSchema); serr != nil {
			return nil, serr
		}

		return nil, err
	}

	if l.Schema != LedgerSchema {
		if serr := strictjson.SchemaError(file, data, "a ledger", LedgerSchema); serr != nil {
			return nil, serr
		}
	}

	errs := l.Validate()
	if l.Scenarios == nil {
		errs = append(errs, &strictjson.Error{Path: "scenarios", Msg: "is null: want the list of scenarios ([] for none)"})
	}

	if len(errs) > 0 {
		return nil, strictjson.Locate(file, data, errs)
	}

	return &l, nil
}

var ledgerOptions = strictjson.Options{Required: map[reflect.Type][]string{
	reflect.TypeFor[Ledger]():      {"schema", "scenarios"},
	reflect.TypeFor[Summary]():     {"scenario", "runs", "passed"},
	reflect.TypeFor[Outcome]():     {"verdict", "seeds"},
	reflect.TypeFor[shard.Stamp](): {"index", "count", "seeds", "scenarios"},
}}

// Validate reports what makes a ledger inconsistent, each problem at its JSON
// path (ReadLedger places them in the file): another schema, more than
// MaxScenarios scenarios, a scenario unnamed or listed twice, runs outside 0 to
// MaxRuns, passed outside 0 to runs, a rate that is not passed/runs or an
// interval that is not within [0, 1] around it, negative or unordered
// percentiles, outcomes of an unknown verdict, listed twice, or whose seeds do
// not add up to the runs and the passes; a shard stamp that is unusable
// (shard.Stamp.Check), or a scenario the stamped night does not run.
func (l *Ledger) Validate() []*strictjson.Error {
	var p strictjson.Problems

	if l.Schema != LedgerSchema {
		p.Addf("schema", "is %s: want %s", strictjson.Quote(l.Schema), LedgerSchema)
	}

	shard.CheckTimeScale(&p, "timeScale", l.TimeScale)

	if l.Shard != nil {
		l.Shard.Check(&p, "shard")

		if l.Shard.TimeScale != l.TimeScale {
			p.Addf("timeScale", "is %s, but the shard's (shard.timeScale) is %s", shard.ScaleText(l.TimeScale), shard.ScaleText(l.Shard.TimeScale))
		}
	}

	if len(l.Scenarios) > MaxScenarios {
		p.Addf("scenarios", "holds %d scenarios: at most %d", len(l.Scenarios), MaxScenarios)

		return p.Errs()
	}

	names := strictjson.Names{What: "scenario", List: "scenarios", Twice: "listed twice"}

	for i := range l.Scenarios {
		if p.Full() {
			break
		}

		s := &l.Scenarios[i]
		sp := strictjson.Index("scenarios", i)

		names.Check(&p, strictjson.Key(sp, "scenario"), i, s.Scenario)

		if l.Shard != nil && !slices.Contains(l.Shard.Scenarios, s.Scenario) {
			p.Addf(strictjson.Key(sp, "scenario"), "is %s, which the shard's night (shard.scenarios) does not run", strictjson.Quote(s.Scenario))
		}

		s.check(&p, sp)
	}

	return p.Errs()
}

// check checks one summary at path sp.
func (s *Summary) check(p *strictjson.Problems, sp string) {
	if s.Runs < 0 || s.Runs > MaxRuns {
		p.Addf(strictjson.Key(sp, "runs"), "is %d: want 0 to %d", s.Runs, MaxRuns)

		return
	}

	switch {
	case s.Passed < 0:
		p.Addf(strictjson.Key(sp, "passed"), "is %d: a count is not negative", s.Passed)

		return
	case s.Passed > s.Runs:
		p.Addf(strictjson.Key(sp, "passed"), "is %d, more than runs (%d)", s.Passed, s.Runs)

		return
	case s.Void < 0 || s.Void > s.Runs-s.Passed:
		p.Addf(strictjson.Key(sp, "void"), "is %d: want 0 to runs - passed (%d)", s.Void, s.Runs-s.Passed)

		return
	case s.Unstruck < 0 || s.Unstruck > s.Passed:
		p.Addf(strictjson.Key(sp, "unstruck"), "is %d: want 0 to passed (%d)", s.Unstruck, s.Passed)

		return
	}

	if rate := s.rate(); !(math.Abs(s.Rate-rate) <= 1e-9) {
		p.Addf(strictjson.Key(sp, "rate"), "is %v, but passed/(runs - void) is %v", s.Rate, rate)
	}

	if !(0 <= s.Low && s.Low <= s.High && s.High <= 1) {
		p.Addf(strictjson.Key(sp, "rateLow"), "is %v and rateHigh %v: want 0 <= rateLow <= rateHigh <= 1", s.Low, s.High)
	}

	switch {
	case s.P50Ms < 0:
		p.Addf(strictjson.Key(sp, "p50Ms"), "is %d: a duration is not negative", s.P50Ms)
	case s.P95Ms < s.P50Ms:
		p.Addf(strictjson.Key(sp, "p95Ms"), "is %d, less than p50Ms (%d)", s.P95Ms, s.P50Ms)
	}

	var seeds, passed, void int

	keys := map[string]int{}

	for i, o := range s.Outcomes {
		op := strictjson.Index(strictjson.Key(sp, "outcomes"), i)

		if !slices.Contains(Verdicts, o.Verdict) {
			p.Addf(strictjson.Key(op, "verdict"), "is %s: want %s", strictjson.Quote(o.Verdict), VerdictList)
		}

		if j, dup := keys[o.Key()]; dup {
			p.Addf(op, "outcome %s is listed twice (also outcomes[%d])", strictjson.Quote(o.Key()), j)
		}

		keys[o.Key()] = i

		if len(o.Seeds) == 0 {
			p.Addf(strictjson.Key(op, "seeds"), "is empty: an outcome is of at least one run")
		}

		seeds += len(o.Seeds)

		switch o.Verdict {
		case Pass:
			passed += len(o.Seeds)
		case Void:
			void += len(o.Seeds)
		}
	}

	switch {
	case seeds != s.Runs:
		p.Addf(strictjson.Key(sp, "outcomes"), "hold %d runs (seeds), but runs is %d", seeds, s.Runs)
	case passed != s.Passed:
		p.Addf(strictjson.Key(sp, "outcomes"), "hold %d passing runs, but passed is %d", passed, s.Passed)
	case void != s.Void:
		p.Addf(strictjson.Key(sp, "outcomes"), "hold %d void runs, but void is %d", void, s.Void)
	}
}

// Write writes the ledger to path as indented JSON, with Schema set to
// LedgerSchema and the scenarios sorted by name so two nights diff cleanly.
// l itself is not modified. The file is written to a temporary file in the
// same directory, fsynced and renamed over path: the previous ledger is the
// next night's baseline, so a crash mid-write must not destroy it.
func (l *Ledger) Write(path string) error {
	out := *l
	out.Schema = LedgerSchema
	out.Scenarios = slices.Clone(l.Scenarios)
	slices.SortStableFunc(out.Scenarios, func(a, b Summary) int {
		return strings.Compare(a.Scenario, b.Scenario)
	})

	if out.Scenarios == nil {
		out.Scenarios = []Summary{} // "scenarios": [], not null
	}

	if err := checkUnique(out.Scenarios); err != nil {
		return fmt.Errorf("write ledger %s: %w", path, err)
	}

	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("write ledger %s: %w", path, err)
	}

	if err := scratch.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write ledger %s: %w", path, err)
	}

	return nil
}

// checkUnique rejects a scenario listed twice: Compare
// matches nights by name, and two entries for one name would make it guess.
func checkUnique(ss []Summary) error {
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		if seen[s.Scenario] {
			return fmt.Errorf("scenario %q listed twice", s.Scenario)
		}

		seen[s.Scenario] = true
	}

	return nil
}

// Change is one scenario's movement between two ledgers.
type Change struct {
	Scenario string  `json:"scenario"`
	Before   Summary `json:"before"` // zero when New
	After    Summary `json:"after"`
	// P is the p-value of the test that decided: FisherLess (the regression
	// test), or FisherGreater when Improvement is set. 1 when New.
	P           float64 `json:"p"`
	Regression  bool    `json:"regression,omitempty"`
	Improvement bool    `json:"improvement,omitempty"`
	New         bool    `json:"new,omitempty"` // not in the baseline
	// Unjudged: one of the two nights has no judged run of the scenario
	// (every run void, or none), so nothing was tested.
	Unjudged bool `json:"unjudged,omitempty"`
}

// Comparable says why two nights cannot be compared ("" when they can): they
// ran at different time scales, so a scenario's pass rate at one says nothing
// of its rate at the other (a Talos timer's margin over etcd's real-time
// waits changes with the scale).
func Comparable(baseline, current *Ledger) string {
	if baseline == nil || current == nil || baseline.TimeScale == current.TimeScale {
		return ""
	}

	return fmt.Sprintf("the baseline ran at time scale %s, this night at %s: pass rates at different scales are not comparable (run the night at the baseline's --time-scale, or start a new baseline)",
		shard.ScaleText(baseline.TimeScale), shard.ScaleText(current.TimeScale))
}

// Compare tests every scenario of current against the same scenario in
// baseline with a one-sided Fisher exact test at α (the caller picks;
// talchaos uses 0.01): Regression when FisherLess < alpha, otherwise
// Improvement when FisherGreater < alpha. The test compares the pass counts
// of the judged runs only (void runs, where the host stalled, are left out;
// Unjudged and neither flag when a night has none); durations and outcomes
// are reported in Before and After for the reader.
//
// A scenario missing from baseline is returned with New set and neither
// flag; one missing from current is not returned (nothing to test). Either
// ledger may be nil. The result is sorted by scenario.
//
// Every scenario is a separate test, so at α = 0.01 up to one unchanged
// scenario in a hundred can still be flagged by chance; a caller about to
// page someone should re-run the flagged scenario first.
func Compare(baseline, current *Ledger, alpha float64) []Change {
	if current == nil {
		return nil
	}

	before := map[string]Summary{}
	if baseline != nil {
		for _, s := range baseline.Scenarios {
			before[s.Scenario] = s
		}
	}

	changes := make([]Change, 0, len(current.Scenarios))

	for _, after := range current.Scenarios {
		c := Change{Scenario: after.Scenario, After: after, P: 1}

		b, ok := before[after.Scenario]
		if !ok {
			c.New = true
			changes = append(changes, c)

			continue
		}

		c.Before = b
		c.P = FisherLess(b.Passed, b.Judged(), after.Passed, after.Judged())

		switch {
		case b.Judged() == 0 || after.Judged() == 0:
			c.Unjudged = true
		case c.P < alpha:
			c.Regression = true
		default:
			if pg := FisherGreater(b.Passed, b.Judged(), after.Passed, after.Judged()); pg < alpha {
				c.Improvement, c.P = true, pg
			}
		}

		changes = append(changes, c)
	}

	slices.SortStableFunc(changes, func(a, b Change) int {
		return strings.Compare(a.Scenario, b.Scenario)
	})

	return changes
}
