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

	// At 30x, not 60x: a stall of the host voids a run from 2 s on, not 1 s.
	code, out := run(t, "hunt", "pki-mismatch", "--seeds", "1-2", "--parallel", "2", "--time-scale", "30", "--report-dir", dir)
	if code != exitPass && code != exitFail && code != exitHarness {
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
	// counted the same way in the exit code, hunt.json and the output. A run
	// the host stalled through (CI's load) is void: outside the rate, and
	// the hunt exits 3 if nothing failed.
	s := h.Summary
	judged := s.Judged()

	want := exitPass
	if s.Passed < judged {
		want = exitFail
	} else if s.Void > 0 {
		want = exitHarness
	}

	if code != want {
		t.Errorf("exit %d with %d of %d judged runs passed (%d void)", code, s.Passed, judged, s.Void)
	}

	lo, hi := stats.Wilson(s.Passed, judged)

	rate := 0.0
	if judged > 0 {
		rate = float64(s.Passed) / float64(judged)
	}

	seeds := 0
	for _, o := range s.Outcomes {
		seeds += len(o.Seeds)
	}

	if h.Schema != reports.HuntSchema || h.Parallel != 2 || s.Runs != 2 || s.Rate != rate || s.Low != lo || s.High != hi ||
		seeds != 2 || (judged > 0 && s.P50Ms <= 0) || s.P95Ms < s.P50Ms {
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
	if err != nil || !strings.Contains(string(md), fmt.Sprintf("**%d of %d**", s.Passed, judged)) {
		t.Errorf("summary.md (%v): %s", err, md)
	}

	if !strings.Contains(out, fmt.Sprintf("expectations held for %d of %d seeds (rate %.2f, 95%% interval %.2f-%.2f)", s.Passed, judged, s.Rate, lo, hi)) {
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
