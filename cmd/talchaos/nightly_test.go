package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
	"github.com/talchaos/talchaos/scenarios"
)

func writeLedger(t *testing.T, path string, sums ...stats.Summary) {
	t.Helper()

	if err := (&stats.Ledger{Scenarios: sums}).Write(path); err != nil {
		t.Fatal(err)
	}
}

func summaryOf(name string, passed, runs int) stats.Summary {
	return summaryVoid(name, passed, 0, runs)
}

// summaryVoid is a scenario's summary of runs of which passed passed and
// the next void were voided by a stall of the host.
func summaryVoid(name string, passed, void, runs int) stats.Summary {
	var rs []stats.Run

	for i := range runs {
		v := stats.Pass

		switch {
		case i >= passed+void:
			v = stats.Fail
		case i >= passed:
			v = stats.Void
		}

		rs = append(rs, stats.Run{Seed: int64(i + 1), Verdict: v, DurationMs: 1000})
	}

	return stats.Summarize(name, rs)
}

// A scenario that passed 20 of 20 seeds last night and 10 of 20 tonight is a
// significant regression: exit 1, naming it with the test's p-value. One
// failure in twenty is not.
func TestNightlyRegression(t *testing.T) {
	dir := t.TempDir()
	base, cur, fine := filepath.Join(dir, "base.json"), filepath.Join(dir, "cur.json"), filepath.Join(dir, "fine.json")

	writeLedger(t, base, summaryOf("too-many-learners", 20, 20), summaryOf("happy-path", 10, 20))
	writeLedger(t, cur, summaryOf("too-many-learners", 10, 20), summaryOf("happy-path", 20, 20))
	writeLedger(t, fine, summaryOf("too-many-learners", 19, 20), summaryOf("happy-path", 10, 20))

	code, out := run(t, "nightly", "--baseline", base, "--compare", cur)
	if code != exitFail {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFail, out)
	}

	if !regexp.MustCompile(`REGRESSION +too-many-learners: 20/20 -> 10/20 \(one-sided Fisher exact test, p = 0\.000218 < 0\.01\)`).MatchString(out) ||
		!strings.Contains(out, "improvement happy-path: 10/20 -> 20/20") {
		t.Errorf("output:\n%s", out)
	}

	if code, out := run(t, "nightly", "--baseline", base, "--compare", fine); code != exitPass || !strings.Contains(out, "no significant regression") {
		t.Errorf("19/20 after 20/20: exit %d:\n%s", code, out)
	}
}

// Runs voided by stalls of the host are left out: a night whose runner
// stood still through half the runs of a scenario, the rest passing, has not
// regressed (exit 0, the void runs counted aloud); one where every run of a
// scenario was void cannot say, and is an error (exit 3), not a pass.
func TestNightlyVoidRuns(t *testing.T) {
	dir := t.TempDir()
	base, half, all := filepath.Join(dir, "base.json"), filepath.Join(dir, "half.json"), filepath.Join(dir, "all.json")

	writeLedger(t, base, summaryOf("happy-path", 20, 20), summaryOf("too-many-learners", 20, 20))
	writeLedger(t, half, summaryVoid("happy-path", 10, 10, 20), summaryOf("too-many-learners", 20, 20))
	writeLedger(t, all, summaryVoid("happy-path", 0, 20, 20), summaryOf("too-many-learners", 20, 20))

	code, out := run(t, "nightly", "--baseline", base, "--compare", half)
	if code != exitPass || !strings.Contains(out, "no significant regression") ||
		!strings.Contains(out, "10 runs void (the host did not run talchaos") {
		t.Errorf("half the runs void: exit %d:\n%s", code, out)
	}

	code, out = run(t, "nightly", "--baseline", base, "--compare", all)
	if code != exitHarness || !strings.Contains(out, "NOT JUDGED  happy-path: 0/0 (+20 void), no judged run tonight") ||
		!strings.Contains(out, "every run of happy-path was void (the host stalled)") {
		t.Errorf("every run void: exit %d:\n%s", code, out)
	}

	// Tonight's judged runs against a baseline with none: not compared, not an error.
	if code, out := run(t, "nightly", "--baseline", all, "--compare", base); code != exitPass ||
		!strings.Contains(out, "not compared happy-path: no judged run to test (0/0 (+20 void) before, 20/20 tonight)") {
		t.Errorf("a baseline of void runs: exit %d:\n%s", code, out)
	}
}

// Passes whose fault never struck say nothing of it: a night with more of
// them than the baseline says so, next to the baseline's count, or that
// the scenario is new; neither is a regression (exit 0).
func TestNightlyUnstruck(t *testing.T) {
	unstruck := func(name string, n, passed int) stats.Summary {
		var rs []stats.Run

		for i := range passed {
			r := stats.Run{Seed: int64(i + 1), Verdict: stats.Pass, DurationMs: 1000}
			if i < n {
				r.Unfired = []string{"cp2-reboots"}
			}

			rs = append(rs, r)
		}

		return stats.Summarize(name, rs)
	}

	dir := t.TempDir()
	base, cur := filepath.Join(dir, "base.json"), filepath.Join(dir, "cur.json")

	writeLedger(t, base, unstruck("reboot-before-promotion", 1, 20), unstruck("happy-path", 0, 20))
	writeLedger(t, cur, unstruck("reboot-before-promotion", 5, 20), unstruck("happy-path", 0, 20), unstruck("learner-not-synced", 2, 10))

	code, out := run(t, "nightly", "--baseline", base, "--compare", cur)
	if code != exitPass || !strings.Contains(out, "no significant regression") {
		t.Errorf("exit %d:\n%s", code, out)
	}

	for _, want := range []string{
		"unstruck    reboot-before-promotion: 5 of 20 passes had a fault that never struck (1 of 20 before): they say nothing of it",
		"unstruck    learner-not-synced: 2 of 10 passes had a fault that never struck (not in the baseline): they say nothing of it",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	if strings.Contains(out, "unstruck    happy-path") {
		t.Errorf("a scenario without unstruck passes is named:\n%s", out)
	}
}

// nightly over a selection writes the ledger, junit.xml (a suite per
// scenario, a case per seed), summary.md and index.html linking every run's
// report.html; compared with its own ledger nothing regressed. (What the
// runs' verdicts are is the scenario suite's business: here they only have
// to be counted the same way everywhere: pki-mismatch, whose runs take
// seconds.)
func TestNightlyWritesItsFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "night")

	// At 30x, not 60x: a stall of the host voids a run from 2 s on, not 1 s.
	code, text := run(t, "nightly", "--scenario", "pki-mismatch", "--seeds", "1-2", "--parallel", "2", "--time-scale", "30", "--out", out)
	if code != exitPass {
		t.Fatalf("exit %d:\n%s", code, text)
	}

	l, err := stats.ReadLedger(filepath.Join(out, reports.LedgerFile))
	if err != nil || len(l.Scenarios) != 1 || l.Scenarios[0].Runs != 2 {
		t.Fatalf("ledger (%v): %+v", err, l)
	}

	// A run the host stalled through is void and counted apart ("1/1 (+1
	// void)"): under CI's load that happens, and is not this test's business.
	cell := reports.PassedOf(l.Scenarios[0])

	if cases := junitCases(t, out); len(cases) != 2 || !strings.Contains(cases[0], "pki-mismatch") {
		t.Errorf("junit.xml: %v", cases)
	}

	checkIndexLinks(t, out, 2)

	if md, err := os.ReadFile(filepath.Join(out, "summary.md")); err != nil || !strings.Contains(string(md), "| pki-mismatch | "+cell+" |") {
		t.Errorf("summary.md (%v):\n%s", err, md)
	}

	if code, text := run(t, "nightly", "--baseline", filepath.Join(out, reports.LedgerFile), "--compare", filepath.Join(out, reports.LedgerFile)); code != exitPass {
		t.Errorf("compared with itself: exit %d:\n%s", code, text)
	}
}

// A night runs the operator's own scenario files beside the built-ins, each
// under its own name (its directory, the ledger, the gate); a file whose name
// is a built-in's, the same scenario named twice, and a file that does not
// parse are refused before anything runs.
func TestNightlyRunsScenarioFiles(t *testing.T) {
	dir := t.TempDir()

	data, _, err := scenarios.Read("pki-mismatch")
	if err != nil {
		t.Fatal(err)
	}

	write := func(name string, data []byte) string {
		t.Helper()

		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}

		return path
	}

	mine := write("mine.yaml", []byte(strings.Replace(string(data), "name: pki-mismatch", "name: my-pki-mismatch", 1)))
	builtinName := write("same-name.yaml", data)
	broken := write("broken.yaml", []byte(strings.Replace(string(data), "name: pki-mismatch", "name: my-broken\nnoSuchField: 1", 1)))

	for _, tc := range []struct {
		scenarios, want string
	}{
		{builtinName, `its name "pki-mismatch" is a built-in scenario's`},
		{mine + "," + mine, `named twice (the scenario "my-pki-mismatch")`},
		{broken, "broken.yaml:"},
		{filepath.Join(dir, "missing.yaml"), "no such built-in scenario or scenario file"},
	} {
		out := filepath.Join(dir, "refused")
		if code, text := run(t, "nightly", "--scenario", tc.scenarios, "--seeds", "1", "--out", out); code != exitInput || !strings.Contains(text, tc.want) {
			t.Errorf("--scenario %s: exit %d, want 2 with %q:\n%s", tc.scenarios, code, tc.want, text)
		}

		if _, err := os.Stat(out); err == nil {
			t.Errorf("--scenario %s: %s was created", tc.scenarios, out)
		}
	}

	out := filepath.Join(dir, "night")

	code, text := run(t, "nightly", "--scenario", mine, "--seeds", "1", "--time-scale", "30", "--out", out)
	if code != exitPass {
		t.Fatalf("exit %d:\n%s", code, text)
	}

	l, err := stats.ReadLedger(filepath.Join(out, reports.LedgerFile))
	if err != nil || len(l.Scenarios) != 1 || l.Scenarios[0].Scenario != "my-pki-mismatch" || l.Scenarios[0].Runs != 1 {
		t.Fatalf("ledger (%v): %+v", err, l)
	}

	if _, err := os.Stat(filepath.Join(out, "my-pki-mismatch", "hunt.json")); err != nil {
		t.Errorf("the scenario's hunt: %v", err)
	}

	// Its runs say to replay them from the file, not from a built-in.
	if want := "talchaos run " + mine + " --target sim --seed 1"; !strings.Contains(text, want) {
		t.Errorf("no %q in:\n%s", want, text)
	}
}

// junitCases are junit.xml's test cases in dir as "SUITE / CASE", sorted.
func junitCases(t *testing.T, dir string) []string {
	t.Helper()

	var j struct {
		Suites []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}

	data, err := os.ReadFile(filepath.Join(dir, reports.JUnitFile))
	if err == nil {
		err = xml.Unmarshal(data, &j)
	}

	if err != nil {
		t.Fatal(err)
	}

	var out []string

	for _, s := range j.Suites {
		for _, c := range s.Cases {
			out = append(out, s.Name+" / "+c.Name)
		}
	}

	slices.Sort(out)

	return out
}

// checkIndexLinks checks a night's index.html in dir links want runs, each
// to a page that is there.
func checkIndexLinks(t *testing.T, dir string, want int) {
	t.Helper()

	index, err := os.ReadFile(filepath.Join(dir, reports.NightlyIndexFile))
	if err != nil {
		t.Fatal(err)
	}

	links := regexp.MustCompile(`href="([^"]+)"`).FindAllStringSubmatch(string(index), -1)
	if len(links) != want {
		t.Errorf("index.html links %d runs, want %d:\n%s", len(links), want, index)
	}

	for _, l := range links {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(l[1]))); err != nil {
			t.Errorf("index.html links a missing page: %v", err)
		}
	}
}

// A night's pairs come round by round: every scenario's first seed in the
// catalogue's order, then every one's second; a scenario with fewer seeds
// (a shard's share) drops out when they are done.
func TestInterleave(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seeds map[string][]int64
		order []string
		want  []string
	}{
		{"one scenario", map[string][]int64{"a": {1, 2, 3}}, []string{"a"}, []string{"a1", "a2", "a3"}},
		{"equal seeds", map[string][]int64{"a": {1, 2}, "b": {1, 2}}, []string{"a", "b"}, []string{"a1", "b1", "a2", "b2"}},
		{"a shard's uneven share", map[string][]int64{"a": {2}, "b": {1, 3, 5}, "c": {4, 6}}, []string{"a", "b", "c"},
			[]string{"a2", "b1", "c4", "b3", "c6", "b5"}},
		{"nothing", map[string][]int64{}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var night []*nightScenario
			for _, name := range tc.order {
				night = append(night, &nightScenario{name: name, seeds: tc.seeds[name]})
			}

			var got []string
			for _, p := range interleave(night) {
				got = append(got, fmt.Sprintf("%s%d", p.s.name, p.seed))
			}

			if !slices.Equal(got, tc.want) {
				t.Errorf("interleave = %v, want %v", got, tc.want)
			}
		})
	}
}

// A night's scenario took the time its runs went on, seeds side by side
// counted once, not from its first seed's start to its last seed's end.
func TestBusy(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 11, 28, 2, 0, s, 0, time.UTC) }

	for _, tc := range []struct {
		name  string
		spans []span
		want  time.Duration
	}{
		{"none", nil, 0},
		{"one", []span{{at(0), at(10)}}, 10 * time.Second},
		{"apart, interleaved with others", []span{{at(100), at(110)}, {at(0), at(10)}, {at(50), at(55)}}, 25 * time.Second},
		{"side by side", []span{{at(0), at(10)}, {at(5), at(20)}, {at(6), at(8)}}, 20 * time.Second},
		{"touching", []span{{at(0), at(10)}, {at(10), at(12)}}, 12 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := busy(tc.spans); got != tc.want {
				t.Errorf("busy = %s, want %s", got, tc.want)
			}
		})
	}
}
