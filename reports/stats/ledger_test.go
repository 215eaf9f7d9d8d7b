package stats

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/strictjson"
)

// summary builds a Summary of passed out of runs, as Summarize would.
func summary(name string, passed, runs int) Summary { return summaryVoid(name, passed, 0, runs) }

// summaryVoid builds a Summary of runs of which passed passed and the next
// void were voided by a stall of the host.
func summaryVoid(name string, passed, void, runs int) Summary {
	rs := make([]Run, runs)
	for i := range rs {
		rs[i] = Run{Seed: int64(i + 1), Verdict: Fail, DurationMs: int64(i+1) * 1000}

		switch {
		case i < passed:
			rs[i].Verdict = Pass
		case i < passed+void:
			rs[i].Verdict = Void
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
		summary("stalled", 20, 20),
		summary("unjudged", 20, 20),
		summaryVoid("was-unjudged", 0, 20, 20),
	}}
	current := &Ledger{Schema: LedgerSchema, Scenarios: []Summary{
		summary("noise", 19, 20),
		summary("new", 3, 5),
		summary("broke", 10, 20),
		summary("fixed", 20, 20),
		// Half the runs voided by host stalls, the rest passed: the same
		// scenario on a runner that stood still, not a regression (10/20
		// counted as failures would be one at p = 1/4588).
		summaryVoid("stalled", 10, 10, 20),
		summaryVoid("unjudged", 0, 20, 20),
		summary("was-unjudged", 0, 20),
	}}

	got := Compare(baseline, current, 0.01)

	want := []struct {
		scenario                           string
		p                                  float64
		regression, improve, new, unjudged bool
	}{
		{"broke", 1.0 / 4588, true, false, false, false},
		{"fixed", 1.0 / 4588, false, true, false, false},
		{"new", 1, false, false, true, false},
		{"noise", 0.5, false, false, false, false},
		{"stalled", 1, false, false, false, false},
		{"unjudged", 1, false, false, false, true},
		{"was-unjudged", 1, false, false, false, true},
	}

	if len(got) != len(want) {
		t.Fatalf("Compare returned %d changes, want %d: %+v", len(got), len(want), got)
	}

	for i, w := range want {
		c := got[i]
		if c.Scenario != w.scenario || !closeRel(c.P, w.p, 1e-12) ||
			c.Regression != w.regression || c.Improvement != w.improve || c.New != w.new || c.Unjudged != w.unjudged {
			t.Errorf("change %d = {%s p=%.6g regression=%v improvement=%v new=%v unjudged=%v}, want {%s p=%.6g %v %v %v %v}",
				i, c.Scenario, c.P, c.Regression, c.Improvement, c.New, c.Unjudged,
				w.scenario, w.p, w.regression, w.improve, w.new, w.unjudged)
		}

		if c.After.Scenario != w.scenario || (!w.new && c.Before.Scenario != w.scenario) {
			t.Errorf("change %d: Before/After are %q/%q, want %q", i, c.Before.Scenario, c.After.Scenario, w.scenario)
		}
	}

	if got := Compare(nil, current, 0.01); len(got) != len(current.Scenarios) || !got[0].New {
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

// A shard's ledger keeps its stamp.
func TestShardLedgerRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	l := &Ledger{Tool: "talchaos test", Shard: &shard.Stamp{Index: 2, Count: 3, Seeds: []int64{1, 2}, Scenarios: []string{"alpha", "zeta"}},
		Scenarios: []Summary{summary("zeta", 1, 1)}}

	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}

	got, err := ReadLedger(path)
	if err != nil {
		t.Fatal(err)
	}

	if !reflect.DeepEqual(got.Shard, l.Shard) {
		t.Errorf("stamp read back as %+v, want %+v", got.Shard, l.Shard)
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

	valid := filepath.Join(dir, "valid.json")
	if err := (&Ledger{Tool: "t", Scenarios: []Summary{summary("a", 20, 20), summary("b", 19, 20)}}).Write(valid); err != nil {
		t.Fatal(err)
	}

	good, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}

	// edit replaces the first occurrence of old in the valid ledger.
	edit := func(old, new string) string {
		if !strings.Contains(string(good), old) {
			t.Fatalf("the valid ledger lacks %q:\n%s", old, good)
		}

		return strings.Replace(string(good), old, new, 1)
	}

	tests := []struct {
		name, content string
		want          []string // substrings of the error, besides the path
	}{
		{"v2.json", `{"schema": "talchaos.ledger/v2", "scenarios": []}`, []string{`:1:12: schema: is "talchaos.ledger/v2": want ` + LedgerSchema}},
		{"noschema.json", `{"scenarios": []}`, []string{":1:1: schema: missing: want " + LedgerSchema}},
		{"report.json", `{"schema": "talchaos.report/v1"}`, []string{`schema: is "talchaos.report/v1"`}},
		{"garbage.json", `{"schema": `, []string{"the file ends before the JSON value does"}},
		{"empty.json", " ", []string{"the file is empty"}},
		{"dup.json", `{"schema": "talchaos.ledger/v1", "scenarios": [{"scenario": "a", "runs": 0, "passed": 0, "outcomes": []}, {"scenario": "a", "runs": 0, "passed": 0, "outcomes": []}]}`,
			[]string{`:1:120: scenarios[1].scenario: scenario "a" is listed twice (also scenarios[0])`}},
		{"noscenarios.json", `{"schema": "talchaos.ledger/v1"}`, []string{":1:1: scenarios: missing: the field is required"}},
		{"nullscenarios.json", `{"schema": "talchaos.ledger/v1", "scenarios": null}`, []string{":1:47: scenarios: is null"}},
		{"negative.json", edit(`"runs": 20`, `"runs": -20`), []string{":8:15: scenarios[0].runs: is -20: want 0 to 1000000"}},
		{"passed-over.json", edit(`"passed": 20`, `"passed": 21`), []string{":9:17: scenarios[0].passed: is 21, more than runs (20)"}},
		{"negative-passed.json", edit(`"passed": 20`, `"passed": -1`), []string{"scenarios[0].passed: is -1: a count is not negative"}},
		{"misspelt.json", edit(`"passed": 20`, `"passd": 20`), []string{`:9:7: scenarios[0].passd: unknown field (did you mean "passed"?)`, ":6:5: scenarios[0].passed: missing: the field is required"}},
		{"misspelt-top.json", edit(`"scenarios"`, `"scenario"`), []string{`scenario: unknown field (did you mean "scenarios"?)`, "scenarios: missing"}},
		{"huge.json", edit(`"runs": 20`, `"runs": 1000000000000000000`), []string{"scenarios[0].runs: is 1000000000000000000: want 0 to 1000000"}},
		{"overflow.json", edit(`"runs": 20`, `"runs": 1e400`), []string{`scenarios[0].runs: "1e400" is not an integer`}},
		{"fraction.json", edit(`"runs": 20`, `"runs": 20.5`), []string{`scenarios[0].runs: "20.5" is not an integer`}},
		{"string.json", edit(`"runs": 20`, `"runs": "20"`), []string{"scenarios[0].runs: a string where an integer belongs"}},
		{"void-over.json", edit(`"passed": 19,`, `"passed": 19, "void": 2,`), []string{"scenarios[1].void: is 2: want 0 to runs - passed (1)"}},
		{"unstruck-over.json", edit(`"passed": 19,`, `"passed": 19, "unstruck": 20,`), []string{"scenarios[1].unstruck: is 20: want 0 to passed (19)"}},
		{"unstruck-negative.json", edit(`"passed": 19,`, `"passed": 19, "unstruck": -1,`), []string{"scenarios[1].unstruck: is -1: want 0 to passed (19)"}},
		{"void-outcomes.json", edit(`"rate": 0.95,`, `"void": 1, "rate": 1,`), []string{"scenarios[1].outcomes: hold 0 void runs, but void is 1"}},
		{"rate.json", edit(`"rate": 1,`, `"rate": 0.5,`), []string{"scenarios[0].rate: is 0.5, but passed/(runs - void) is 1"}},
		{"interval.json", edit(`"rateHigh": 1,`, `"rateHigh": 2,`), []string{"scenarios[0].rateLow: is 0.83"}},
		{"percentiles.json", edit(`"p50Ms": 10000,`, `"p50Ms": 99999999,`), []string{"scenarios[0].p95Ms: is 19000, less than p50Ms (99999999)"}},
		{"seeds.json", edit(`"runs": 20`, `"runs": 19`), []string{"scenarios[0].passed: is 20, more than runs (19)"}},
		{"outcomes.json", edit(`"seeds": [`, `"seeds": [99, `), []string{"scenarios[0].outcomes: hold 21 runs (seeds), but runs is 20"}},
		{"verdict.json", edit(`"verdict": "pass"`, `"verdict": "maybe"`), []string{`scenarios[0].outcomes[0].verdict: is "maybe": want pass, fail, error or void`, "outcomes: hold 0 passing runs, but passed is 20"}},
		{"trailing.json", string(good) + "{}\n", []string{"data after the end of the JSON value"}},
		{"duplicate-key.json", edit(`"passed": 20`, `"passed": 20, "passed": 0`), []string{"scenarios[0].passed: written twice"}},
		{"control.json", edit(`"tool": "t"`, "\"tool\": \"t\", \"\\u001b]0;pwned\\u0007\": 1"), []string{`["\x1b]0;pwned\a"]: unknown field`}},
		{"missing.json", "", []string{"cannot read the ledger", "no such file or directory"}}, // not created

		// A shard's ledger: its stamp is checked, and so are its scenarios against the stamp.
		{"shard-count.json", edit(`"tool": "t",`, `"tool": "t", "shard": {"index": 1, "count": 0, "seeds": [1], "scenarios": ["a", "b"]},`), []string{"shard.count: is 0: want 1 to 1000 shards"}},
		{"shard-foreign.json", edit(`"tool": "t",`, `"tool": "t", "shard": {"index": 1, "count": 2, "seeds": [1], "scenarios": ["a"]},`), []string{`scenarios[1].scenario: is "b", which the shard's night (shard.scenarios) does not run`}},
		{"time-scale.json", edit(`"tool": "t",`, `"tool": "t", "timeScale": 0.5,`), []string{"timeScale: is 0.5: want 1 to 10000 (--time-scale), or none for each scenario's own"}},
		{"shard-time-scale.json", edit(`"tool": "t",`, `"tool": "t", "timeScale": 30, "shard": {"index": 1, "count": 1, "seeds": [1], "scenarios": ["a", "b"]},`), []string{"timeScale: is 30x, but the shard's (shard.timeScale) is each scenario's own"}},
		{"shard-missing-field.json", edit(`"tool": "t",`, `"tool": "t", "shard": {"index": 1, "count": 2, "scenarios": ["a", "b"]},`), []string{"shard.seeds: missing: the field is required"}},
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

		var se *strictjson.Error
		if !errors.As(err, &se) || se.File != path {
			t.Errorf("%s: error %v is not a *strictjson.Error naming the file", tt.name, err)
		}

		for _, s := range append(tt.want, path) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, s)
			}
		}

		if strings.ContainsAny(err.Error(), "\x1b\x07") {
			t.Errorf("%s: error holds control characters: %q", tt.name, err)
		}
	}
}

// A ledger that is not a regular file is refused at once: a FIFO is not
// waited on, a device not read.
func TestReadLedgerNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ledger.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{fifo, "/dev/zero", t.TempDir()} {
		done := make(chan error, 1)

		go func() {
			_, err := ReadLedger(p)
			done <- err
		}()

		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), p+": cannot read the ledger: is ") {
				t.Errorf("ReadLedger(%s): %v", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadLedger(%s) blocked", p)
		}
	}
}

// A baseline whose passes are misspelt used to read as 0 of 20 and hide a
// 20/20 -> 0/20 drop; now it is refused, and a valid one shows the drop.
func TestRegressionNotHiddenByABadLedger(t *testing.T) {
	dir := t.TempDir()
	base, cur := filepath.Join(dir, "base.json"), filepath.Join(dir, "cur.json")

	if err := (&Ledger{Scenarios: []Summary{summary("s", 20, 20)}}).Write(base); err != nil {
		t.Fatal(err)
	}

	if err := (&Ledger{Scenarios: []Summary{summary("s", 0, 20)}}).Write(cur); err != nil {
		t.Fatal(err)
	}

	b, err := ReadLedger(base)
	if err != nil {
		t.Fatal(err)
	}

	c, err := ReadLedger(cur)
	if err != nil {
		t.Fatal(err)
	}

	if ch := Compare(b, c, 0.01); len(ch) != 1 || !ch[0].Regression || ch[0].P > 1e-10 {
		t.Errorf("20/20 -> 0/20: %+v", ch)
	}

	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}

	for _, bad := range []string{
		strings.Replace(string(data), `"passed": 20`, `"Passed": 20`, 1),
		strings.Replace(string(data), `"runs": 20`, `"runs": -20`, 1),
		strings.Replace(string(data), `"scenarios"`, `"scenarioz"`, 1),
	} {
		if err := os.WriteFile(base, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}

		if _, err := ReadLedger(base); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}
