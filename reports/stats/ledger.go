package stats

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/scratch"
)

// LedgerSchema names the ledger's JSON format. A reader rejects any other
// value instead of guessing, so a format change can never be mistaken for a
// change in reliability.
const LedgerSchema = "talchaos.ledger/v1"

// Ledger is one night's record: a Summary per scenario. Tonight's ledger is
// compared with last night's by Compare, and then becomes the next baseline.
type Ledger struct {
	Schema    string    `json:"schema"` // LedgerSchema; Write sets it
	Created   time.Time `json:"created"`
	Tool      string    `json:"tool,omitempty"` // e.g. "talchaos v0.4.1"
	Scenarios []Summary `json:"scenarios"`      // sorted by Scenario, unique
}

// ReadLedger reads a ledger written by Write. Every error names the file,
// since a nightly job juggles two of them. A file of another schema is
// rejected rather than half-read.
func ReadLedger(path string) (*Ledger, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err) // *PathError names the file
	}

	var l Ledger
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("read ledger %s: %w", path, err)
	}

	if l.Schema != LedgerSchema {
		return nil, fmt.Errorf("read ledger %s: schema %q, want %q (not a ledger this talchaos can read)",
			path, l.Schema, LedgerSchema)
	}

	if err := checkUnique(l.Scenarios); err != nil {
		return nil, fmt.Errorf("read ledger %s: %w", path, err)
	}

	return &l, nil
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
}

// Compare tests every scenario of current against the same scenario in
// baseline with a one-sided Fisher exact test at α (the caller picks;
// talchaos uses 0.01): Regression when FisherLess < alpha, otherwise
// Improvement when FisherGreater < alpha. The test compares pass counts only;
// durations and outcomes are reported in Before and After for the reader.
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
		c.P = FisherLess(b.Passed, b.Runs, after.Passed, after.Runs)

		if c.P < alpha {
			c.Regression = true
		} else if pg := FisherGreater(b.Passed, b.Runs, after.Passed, after.Runs); pg < alpha {
			c.Improvement, c.P = true, pg
		}

		changes = append(changes, c)
	}

	slices.SortStableFunc(changes, func(a, b Change) int {
		return strings.Compare(a.Scenario, b.Scenario)
	})

	return changes
}
