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
// as the run resolved them, after the file was changed and then deleted; it
// can be judged again from its own report.
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

	code, out := run(t, "run", file, "--seed", "7", "--report-dir", filepath.Join(dir, "first"))
	if code != exitPass {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}

	first := readReport(t, filepath.Join(dir, "first", "report.json"))

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

	if again.Seed != 7 || again.Source == nil || again.Source.SHA256 != first.Source.SHA256 {
		t.Errorf("replay ran seed %d of source %+v, want seed 7 of %s", again.Seed, again.Source, first.Source.SHA256)
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
