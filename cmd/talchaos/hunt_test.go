package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/reports"
)

// A hunt over two seeds at once writes hunt.json with the rate, its interval
// and the outcomes, a junit.xml with a test case per seed, summary.md and each
// seed's report.
func TestHuntWritesItsReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hunt")

	code, out := run(t, "hunt", "happy-path", "--seeds", "1-2", "--parallel", "2", "--report-dir", dir)
	if code != exitPass {
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

	s := h.Summary
	if h.Schema != reports.HuntSchema || h.Parallel != 2 || s.Runs != 2 || s.Passed != 2 || s.Rate != 1 || s.Low <= 0.3 || s.High != 1 ||
		len(s.Outcomes) != 1 || s.Outcomes[0].Key() != "pass" || len(s.Outcomes[0].Seeds) != 2 || s.P50Ms <= 0 || s.P95Ms < s.P50Ms {
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
	if err != nil || !strings.Contains(string(md), "**2 of 2**") {
		t.Errorf("summary.md (%v): %s", err, md)
	}

	if !strings.Contains(out, "expectations held for 2 of 2 seeds (rate 1.00, 95% interval 0.34-1.00)") {
		t.Errorf("output:\n%s", out)
	}
}
