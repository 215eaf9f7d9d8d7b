package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// A hunt over two seeds at once writes hunt.json with the rate, its interval
// and the outcomes, a junit.xml with a test case per seed, summary.md and each
// seed's report (pki-mismatch: its runs take seconds).
func TestHuntWritesItsReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hunt")

	code, out := run(t, "hunt", "pki-mismatch", "--seeds", "1-2", "--parallel", "2", "--report-dir", dir)
	if code != exitPass && code != exitFail {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	data, err := os.ReadFile(filepath.Join(dir, reports.HuntJSONFile))
	if err != nil {
		t.Fatal(err)
	}

	var h reports.Hunt
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}

	// The verdicts are the scenario suite's business; here they must be
	// counted the same way in the exit code, hunt.json and the output.
	s := h.Summary
	if want := map[bool]int{true: exitPass, false: exitFail}[s.Passed == 2]; code != want {
		t.Errorf("exit %d with %d of 2 passed", code, s.Passed)
	}

	lo, hi := stats.Wilson(s.Passed, 2)

	seeds := 0
	for _, o := range s.Outcomes {
		seeds += len(o.Seeds)
	}

	if h.Schema != reports.HuntSchema || h.Parallel != 2 || s.Runs != 2 || s.Rate != float64(s.Passed)/2 || s.Low != lo || s.High != hi ||
		seeds != 2 || s.P50Ms <= 0 || s.P95Ms < s.P50Ms {
		t.Errorf("hunt.json: %+v", h)
	}

	for i, r := range h.Runs {
		if r.Seed != int64(i+1) || r.Report != filepath.Base(r.Report) {
			t.Errorf("run %d: %+v", i, r)
		}

		if _, err := os.Stat(filepath.Join(dir, r.Report, reports.JSONFile)); err != nil {
			t.Error(err)
		}
	}

	var junit struct {
		Suites []struct {
			Tests int `xml:"tests,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}

	data, err = os.ReadFile(filepath.Join(dir, reports.JUnitFile))
	if err == nil {
		err = xml.Unmarshal(data, &junit)
	}

	if err != nil || len(junit.Suites) != 1 || junit.Suites[0].Tests != 2 || len(junit.Suites[0].Cases) != 2 || junit.Suites[0].Cases[1].Name != "seed 2" {
		t.Errorf("junit.xml (%v): %s", err, data)
	}

	md, err := os.ReadFile(filepath.Join(dir, reports.HuntSummaryFile))
	if err != nil || !strings.Contains(string(md), fmt.Sprintf("**%d of 2**", s.Passed)) {
		t.Errorf("summary.md (%v): %s", err, md)
	}

	if !strings.Contains(out, fmt.Sprintf("expectations held for %d of 2 seeds (rate %.2f, 95%% interval %.2f-%.2f)", s.Passed, s.Rate, lo, hi)) {
		t.Errorf("output:\n%s", out)
	}
}

// A hunt exits 1 when a judged seed failed, else 3 when a seed's run was
// void (the host stalled), else 0; a shrink goes on past void runs alone.
func TestHuntVerdictOfVoidRuns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdicts []string
		code     int
	}{
		{"all passed", []string{stats.Pass, stats.Pass}, exitPass},
		{"a failure", []string{stats.Pass, stats.Fail}, exitFail},
		{"a failure and a void run", []string{stats.Void, stats.Fail}, exitFail},
		{"passes and a void run", []string{stats.Pass, stats.Void}, exitHarness},
		{"an error", []string{stats.Pass, stats.Error}, exitFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []stats.Run
			for i, v := range tc.verdicts {
				runs = append(runs, stats.Run{Seed: int64(i + 1), Verdict: v})
			}

			err := huntVerdictOf(&reports.Hunt{Summary: stats.Summarize("s", runs)})

			code := exitPass
			if ee := (*exitError)(nil); errors.As(err, &ee) {
				code = ee.code
			}

			if code != tc.code {
				t.Errorf("exit %d (%v), want %d", code, err, tc.code)
			}

			if errors.As(err, new(voidRunsError)) != (tc.code == exitHarness) {
				t.Errorf("void runs alone should be told apart (a shrink goes on): %v", err)
			}
		})
	}
}
