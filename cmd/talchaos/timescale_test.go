package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// Nights at different time scales are not compared: the gate refuses a
// baseline of another scale before the night runs, and --compare refuses
// two ledgers of different scales.
func TestNightlyRefusesABaselineOfAnotherScale(t *testing.T) {
	dir := t.TempDir()
	base, at30 := filepath.Join(dir, "base.json"), filepath.Join(dir, "at30.json")

	writeLedger(t, base, summaryOf("happy-path", 3, 3))

	if err := (&stats.Ledger{TimeScale: 30, Scenarios: []stats.Summary{summaryOf("happy-path", 3, 3)}}).Write(at30); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "night")

	code, text := run(t, "nightly", "--scenario", "happy-path", "--time-scale", "30", "--baseline", base, "--out", out)
	if code != exitInput || !strings.Contains(text, "the baseline ran at time scale each scenario's own, this night at 30x") {
		t.Errorf("nightly --time-scale 30 against a baseline at each scenario's own: exit %d, want %d:\n%s", code, exitInput, text)
	}

	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused night made its directory: %v", err)
	}

	code, text = run(t, "nightly", "--compare", at30, "--baseline", base)
	if code != exitInput || !strings.Contains(text, "pass rates at different scales are not comparable") {
		t.Errorf("--compare of a night at 30x with one at each scenario's own: exit %d, want %d:\n%s", code, exitInput, text)
	}

	if code, text = run(t, "nightly", "--compare", at30, "--baseline", at30); code != exitPass {
		t.Errorf("--compare of two nights at 30x: exit %d, want %d:\n%s", code, exitPass, text)
	}
}

// A hunt at --time-scale runs every seed at that scale, says so in each
// seed's replay command and in its shard stamp, and merge refuses shards of
// one hunt run at different scales.
func TestHuntAtATimeScale(t *testing.T) {
	if testing.Short() {
		t.Skip("runs invalid-config three times")
	}

	t.Setenv(shard.EnvShard, "")
	t.Setenv(shard.EnvShards, "")

	root := t.TempDir()
	dirs := []string{filepath.Join(root, "shard-1"), filepath.Join(root, "shard-2"), filepath.Join(root, "shard-2-own")}
	args := [][]string{
		{"--shard", "1/2", "--time-scale", "30"},
		{"--shard", "2/2", "--time-scale", "30"},
		{"--shard", "2/2"},
	}

	argv := make([][]string, len(dirs))
	for i := range dirs {
		argv[i] = append([]string{"hunt", "invalid-config", "--seeds", "1-2", "--report-dir", dirs[i]}, args[i]...)
	}

	codes, outs := runSideBySide(t, argv...)

	for i, code := range codes {
		if code != exitPass {
			t.Fatalf("hunt %s: exit %d, want %d:\n%s", strings.Join(args[i], " "), code, exitPass, outs[i])
		}
	}

	h, err := reports.ReadHunt(filepath.Join(dirs[0], reports.HuntJSONFile))
	if err != nil {
		t.Fatal(err)
	}

	if h.Shard == nil || h.Shard.TimeScale != 30 || h.TimeScale != 30 || len(h.Runs) != 1 {
		t.Fatalf("shard 1/2 at 30x: stamp %+v, hunt at %g, %d run(s)", h.Shard, h.TimeScale, len(h.Runs))
	}

	r := readReport(t, filepath.Join(dirs[0], fmt.Sprintf("seed-%d", h.Runs[0].Seed), "report.json"))
	if r.ScenarioTimeScale != 30 || !strings.HasSuffix(h.Runs[0].Replay, " --time-scale 30") {
		t.Errorf("seed %d of a hunt at 30x: the scenario ran at %g, replay %q", h.Runs[0].Seed, r.ScenarioTimeScale, h.Runs[0].Replay)
	}

	code, text := run(t, "merge", "--out", filepath.Join(root, "mixed"), dirs[0], dirs[2])
	if code != exitInput || !strings.Contains(text, "they ran at time scales 30x and each scenario's own") {
		t.Errorf("merge of shards at 30x and at the scenario's own: exit %d, want %d:\n%s", code, exitInput, text)
	}

	if code, text := run(t, "merge", "--out", filepath.Join(root, "merged"), dirs[0], dirs[1]); code != exitPass {
		t.Fatalf("merge of two shards at 30x: exit %d, want %d:\n%s", code, exitPass, text)
	}

	merged, err := reports.ReadHunt(filepath.Join(root, "merged", reports.HuntJSONFile))
	if err != nil {
		t.Fatal(err)
	}

	if merged.TimeScale != 30 || merged.Shard != nil {
		t.Errorf("the merged hunt of two shards at 30x: at %g, stamp %+v", merged.TimeScale, merged.Shard)
	}

	if sum, err := os.ReadFile(filepath.Join(root, "merged", reports.HuntSummaryFile)); err != nil || !strings.Contains(string(sum), "time scale 30x") {
		t.Errorf("the merged hunt's summary.md does not say its time scale (%v):\n%s", err, sum)
	}
}
