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
// not pass, from whichever shard ran them.
func TestNightHeld(t *testing.T) {
	tests := []struct {
		name   string
		shards [][]stats.Run // a shard's runs of scenario "s"
		want   string
	}{
		{
			name:   "every run passed",
			shards: [][]stats.Run{{{Seed: 1, Verdict: "pass"}}, {{Seed: 2, Verdict: "pass"}}},
			want:   "2 of 2 runs passed",
		},
		{
			name:   "a failed seed in the second shard",
			shards: [][]stats.Run{{{Seed: 1, Verdict: "pass"}}, {{Seed: 2, Verdict: "fail"}}},
			want:   "1 of 2 runs passed; s seed 2 fail: cp3 stayed in maintenance",
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()

			var (
				all  []stats.Run
				dirs []string
			)

			for k, runs := range tt.shards {
				dir := filepath.Join(root, "shard", string(rune('1'+k)))
				dirs = append(dirs, dir)
				all = append(all, runs...)

				var h huntJSON
				for _, r := range runs {
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

				writeJSON(t, filepath.Join(dir, "s", reports.HuntJSONFile), h)
			}

			merged := filepath.Join(root, "merged")
			if err := os.MkdirAll(merged, 0o755); err != nil {
				t.Fatal(err)
			}

			l := &stats.Ledger{Scenarios: []stats.Summary{stats.Summarize("s", all)}}
			if err := l.Write(filepath.Join(merged, reports.LedgerFile)); err != nil {
				t.Fatal(err)
			}

			got, err := nightHeld(merged, dirs)
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
