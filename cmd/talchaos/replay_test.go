package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/result"
)

// A replay runs the scenario copy the report holds, with the faults resolved
// as the run resolved them and at the time scale the run was given
// (--time-scale), after the file was changed and then deleted; it can be
// judged again from its own report.
func TestReplayFromTheReportAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario twice")
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "replayed.yaml")

	const sc = `apiVersion: talchaos/v1
kind: Scenario
name: replayed
timeScale: 60
cluster: {controlPlanes: 3}
faults:
  - {name: slow-api, kind: latency, node: random, port: talos-api, latency: 5ms, jitter: 2ms, at: 0s, for: 1m}
expect:
  converged: true
  voters: 3
`

	if err := os.WriteFile(file, []byte(sc), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out := run(t, "run", file, "--seed", "7", "--time-scale", "30", "--report-dir", filepath.Join(dir, "first"))
	if code != exitPass {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}

	first := readReport(t, filepath.Join(dir, "first", "report.json"))

	if first.TimeScale != 30 || first.ScenarioTimeScale != 30 || !strings.HasSuffix(first.Replay, " --time-scale 30") {
		t.Errorf("run at --time-scale 30: report time scale %g, scenario's %g, replay %q", first.TimeScale, first.ScenarioTimeScale, first.Replay)
	}

	// The file changes (its expectation would now fail), then goes away.
	if err := os.WriteFile(file, []byte(strings.Replace(sc, "voters: 3", "voters: 1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}

	code, out = run(t, "replay", filepath.Join(dir, "first"), "--report-dir", filepath.Join(dir, "again"))
	if code != exitPass {
		t.Fatalf("replay: exit %d:\n%s", code, out)
	}

	again := readReport(t, filepath.Join(dir, "again", "report.json"))

	if again.Seed != 7 || again.TimeScale != 30 || again.Source == nil || again.Source.SHA256 != first.Source.SHA256 {
		t.Errorf("replay ran seed %d at %gx of source %+v, want seed 7 at 30x of %s", again.Seed, again.TimeScale, again.Source, first.Source.SHA256)
	}

	if !reflect.DeepEqual(again.Schedule, first.Schedule) || len(first.Schedule) != 1 || len(first.Schedule[0].Nodes) != 1 {
		t.Errorf("schedules differ:\n%+v\n%+v", first.Schedule, again.Schedule)
	}

	if again.Verdict != result.Pass || !strings.HasPrefix(again.Replay, "talchaos replay ") {
		t.Errorf("replay verdict %s, replay command %q", again.Verdict, again.Replay)
	}

	code, out = run(t, "report", filepath.Join(dir, "again"), "--rejudge")
	if code != exitPass || !strings.Contains(out, "rejudged: the same verdict (PASS)") {
		t.Errorf("rejudge of the replay: exit %d:\n%s", code, out)
	}
}

// --time-scale out of its range is bad input, with a report saying so.
func TestRunTimeScaleOutOfRange(t *testing.T) {
	for _, scale := range []string{"0", "0.5", "10001", "NaN"} {
		dir := t.TempDir()

		code, out := run(t, "run", "happy-path", "--time-scale", scale, "--report-dir", dir)
		if code != exitInput || !strings.Contains(out, "--time-scale: must be between 1 and 10000") {
			t.Errorf("--time-scale %s: exit %d, want %d:\n%s", scale, code, exitInput, out)
		}

		if r := readReport(t, filepath.Join(dir, "report.json")); r.Verdict != result.Error {
			t.Errorf("--time-scale %s: report verdict %s", scale, r.Verdict)
		}
	}
}
