package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// TestNightHeld counts the merged night's runs and names the seeds that did
// not pass, from the merged hunts.
func TestNightHeld(t *testing.T) {
	tests := []struct {
		name string
		runs []stats.Run // the night's runs of scenario "s"
		want string
	}{
		{
			name: "every run passed",
			runs: []stats.Run{{Seed: 1, Verdict: "pass"}, {Seed: 2, Verdict: "pass"}},
			want: "2 of 2 runs passed",
		},
		{
			name: "a failed seed",
			runs: []stats.Run{{Seed: 1, Verdict: "pass"}, {Seed: 2, Verdict: "fail"}},
			want: "1 of 2 runs passed; s seed 2 fail: cp3 stayed in maintenance",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			merged := t.TempDir()

			var h huntJSON
			for _, r := range tt.runs {
				failure := ""
				if r.Verdict != "pass" {
					failure = "cp3 stayed in maintenance"
				}

				h.Runs = append(h.Runs, struct {
					Seed    int64  `json:"seed"`
					Verdict string `json:"verdict"`
					Failure string `json:"failure"`
				}{r.Seed, r.Verdict, failure})
			}

			writeJSON(t, filepath.Join(merged, "s", reports.HuntJSONFile), h)

			l := &stats.Ledger{Scenarios: []stats.Summary{stats.Summarize("s", tt.runs)}}
			if err := l.Write(filepath.Join(merged, reports.LedgerFile)); err != nil {
				t.Fatal(err)
			}

			got, err := nightHeld(merged)
			if err != nil {
				t.Fatal(err)
			}

			if got != tt.want {
				t.Errorf("nightHeld = %q, want %q", got, tt.want)
			}
		})
	}
}

func writeJSON(t *testing.T, file string, v any) {
	t.Helper()

	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}

	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
