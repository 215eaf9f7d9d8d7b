package stats

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// summary builds a Summary of passed out of runs, as Summarize would.
func summary(name string, passed, runs int) Summary {
	rs := make([]Run, runs)
	for i := range rs {
		rs[i] = Run{Seed: int64(i + 1), Verdict: Fail, DurationMs: int64(i+1) * 1000}
		if i < passed {
			rs[i].Verdict = Pass
		}
	}

	return Summarize(name, rs)
}

func TestCompare(t *testing.T) {
	baseline := &Ledger{Schema: LedgerSchema, Scenarios: []Summary{
		summary("broke", 20, 20),
		summary("fixed", 10, 20),
		summary("noise", 20, 20),
		summary("dropped", 20, 20),
	}}
	current := &Ledger{Schema: LedgerSchema, Scenarios: []Summary{
		summary("noise", 19, 20),
		summary("new", 3, 5),
		summary("broke", 10, 20),
		summary("fixed", 20, 20),
	}}

	got := Compare(baseline, current, 0.01)

	want := []struct {
		scenario                 string
		p                        float64
		regression, improve, new bool
	}{
		{"broke", 1.0 / 4588, true, false, false},
		{"fixed", 1.0 / 4588, false, true, false},
		{"new", 1, false, false, true},
		{"noise", 0.5, false, false, false},
	}

	if len(got) != len(want) {
		t.Fatalf("Compare returned %d changes, want %d: %+v", len(got), len(want), got)
	}

	for i, w := range want {
		c := got[i]
		if c.Scenario != w.scenario || !closeRel(c.P, w.p, 1e-12) ||
			c.Regression != w.regression || c.Improvement != w.improve || c.New != w.new {
			t.Errorf("change %d = {%s p=%.6g regression=%v improvement=%v new=%v}, want {%s p=%.6g %v %v %v}",
				i, c.Scenario, c.P, c.Regression, c.Improvement, c.New,
				w.scenario, w.p, w.regression, w.improve, w.new)
		}

		if c.After.Scenario != w.scenario || (!w.new && c.Before.Scenario != w.scenario) {
			t.Errorf("change %d: Before/After are %q/%q, want %q", i, c.Before.Scenario, c.After.Scenario, w.scenario)
		}
	}

	if got := Compare(nil, current, 0.01); len(got) != 4 || !got[0].New {
		t.Errorf("Compare(nil, current) = %+v, want every scenario new", got)
	}

	if got := Compare(baseline, nil, 0.01); got != nil {
		t.Errorf("Compare(baseline, nil) = %+v, want nil", got)
	}
}

func TestLedgerRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	l := &Ledger{
		Created:   time.Date(2026, 3, 1, 2, 3, 4, 0, time.UTC),
		Tool:      "talchaos test",
		Scenarios: []Summary{summary("zeta", 19, 20), summary("alpha", 20, 20)},
	}

	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}

	if l.Schema != "" || l.Scenarios[0].Scenario != "zeta" {
		t.Errorf("Write modified the ledger: schema %q, first %q", l.Schema, l.Scenarios[0].Scenario)
	}

	got, err := ReadLedger(path)
	if err != nil {
		t.Fatal(err)
	}

	want := *l
	want.Schema = LedgerSchema
	want.Scenarios = []Summary{l.Scenarios[1], l.Scenarios[0]} // sorted by name

	if !reflect.DeepEqual(*got, want) {
		t.Errorf("round trip:\n got  %+v\n want %+v", *got, want)
	}

	// Overwrite in place; no temporary file may be left behind.
	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}

	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}

	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after two writes, want only the ledger", len(entries))
	}
}

func TestLedgerWriteRejectsDuplicates(t *testing.T) {
	l := &Ledger{Scenarios: []Summary{summary("a", 1, 1), summary("a", 0, 1)}}
	if err := l.Write(filepath.Join(t.TempDir(), "ledger.json")); err == nil {
		t.Error("Write accepted a scenario listed twice")
	}
}

func TestReadLedgerErrors(t *testing.T) {
	dir := t.TempDir()

	tests := []struct {
		name, content string
		want          []string // substrings of the error
	}{
		{"v2.json", `{"schema": "talchaos.ledger/v2", "scenarios": []}`, []string{"talchaos.ledger/v2", LedgerSchema}},
		{"noschema.json", `{"scenarios": []}`, []string{`schema ""`}},
		{"report.json", `{"schema": "talchaos.report/v1"}`, []string{"talchaos.report/v1"}},
		{"garbage.json", `{"schema": `, nil},
		{"dup.json", `{"schema": "talchaos.ledger/v1", "scenarios": [{"scenario": "a"}, {"scenario": "a"}]}`, []string{"twice"}},
		{"missing.json", "", nil}, // not created
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.name)
		if tt.content != "" {
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}

		_, err := ReadLedger(path)
		if err == nil {
			t.Errorf("%s: ReadLedger accepted it", tt.name)

			continue
		}

		for _, s := range append(tt.want, path) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, s)
			}
		}
	}
}
