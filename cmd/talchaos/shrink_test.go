package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/reports/stats"
	"github.com/talchaos/talchaos/sim/simtest"
)

// invalid-config padded with three faults and two workers that play no part
// in its outcome: the shrink, over real runs, removes them all and keeps the
// config patch the outcome comes from.
func TestShrinkRemovesPadding(t *testing.T) {
	var (
		dir  string
		code int
		out  string
	)

	// A hunt whose every run the host stalled through has nothing to
	// shrink (exit 3): made again, up to simtest.VoidRuns in all, as the
	// scenario suite makes a void run again (a loaded make test once voided
	// both seeds with stalls of 2 and 4 s).
	for attempt := 1; attempt <= simtest.VoidRuns; attempt++ {
		dir = filepath.Join(t.TempDir(), "shrink")

		code, out = run(t, "hunt", "testdata/padded-invalid-config.yaml", "--shrink", "--rate", "1", "--seeds", "1-2", "--parallel", "2", "--report-dir", dir)
		if code != exitHarness || !strings.Contains(out, "nothing to shrink: every seed's run was voided by a stall of the host") {
			break
		}

		t.Logf("attempt %d of %d: every run void", attempt, simtest.VoidRuns)
	}

	if code != exitPass {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	path := filepath.Join(dir, "padded-invalid-config.shrunk.yaml")

	sc, err := chaos.Load(path)
	if err != nil {
		t.Fatalf("the minimal scenario: %v\n%s", err, out)
	}

	if len(sc.Faults) != 0 || sc.Cluster.Workers != 0 || len(sc.Cluster.ConfigPatches) != 1 {
		t.Errorf("%d faults, %d workers, %d config patches; want none, none and the one:\n%s", len(sc.Faults), sc.Cluster.Workers, len(sc.Cluster.ConfigPatches), out)
	}

	data, err := os.ReadFile(filepath.Join(dir, "shrink.json"))
	if err != nil {
		t.Fatal(err)
	}

	var rep shrinkReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}

	if !strings.HasPrefix(rep.Outcome, "pass: config-invalid") || rep.File != filepath.Base(path) || len(rep.Kept()) == 0 {
		t.Errorf("shrink.json: %s", data)
	}

	for _, want := range []string{"kept   drop faults slow-api (latency), thin-peer (bandwidth), peer-resets (slow-close)", "kept   workers 2 → 0", "needed drop config patch 1", "minimal scenario: " + path} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestShrinkFlags(t *testing.T) {
	for _, args := range [][]string{
		{"hunt", "happy-path", "--rate", "0.5"},
		{"hunt", "happy-path", "--shrink", "--rate", "0"},
		{"hunt", "happy-path", "--shrink", "--rate", "1.5"},
		{"hunt", "happy-path", "--shrink", "--target", "real"},
	} {
		if code, out := run(t, args...); code != exitInput {
			t.Errorf("%q: exit %d, want %d:\n%s", args, code, exitInput, out)
		}
	}
}

// The outcome a shrink keeps is the commonest failing one, else the
// commonest; runs voided by a stall of the host are none, however many.
func TestOutcomeToShrink(t *testing.T) {
	run := func(seed int64, verdict string, codes ...string) stats.Run {
		return stats.Run{Seed: seed, Verdict: verdict, Diagnoses: codes}
	}

	for _, tc := range []struct {
		name string
		runs []stats.Run
		want string // the outcome's key; "" for none
	}{
		{"a failure beside passes", []stats.Run{run(1, stats.Pass), run(2, stats.Pass), run(3, stats.Fail, "too-many-learners")}, "fail: too-many-learners"},
		{"no failure", []stats.Run{run(1, stats.Pass), run(2, stats.Pass)}, "pass"},
		{"void is no outcome", []stats.Run{run(1, stats.Void, "etcd-failed"), run(2, stats.Void, "etcd-failed"), run(3, stats.Pass)}, "pass"},
		{"void before a failure", []stats.Run{run(1, stats.Void), run(2, stats.Void), run(3, stats.Fail, "no-quorum"), run(4, stats.Pass), run(5, stats.Pass)}, "fail: no-quorum"},
		{"every run void", []stats.Run{run(1, stats.Void), run(2, stats.Void)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := outcomeToShrink(stats.Summarize("s", tc.runs))

			switch {
			case got == nil && tc.want != "":
				t.Errorf("no outcome, want %q", tc.want)
			case got != nil && got.Key() != tc.want:
				t.Errorf("outcome %q, want %q", got.Key(), tc.want)
			}
		})
	}
}
