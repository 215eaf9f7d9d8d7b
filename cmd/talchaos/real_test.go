package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/result/secretscan"
	"github.com/talchaos/talchaos/sim"
)

// The real target's code path, run against simulated nodes that it reaches only
// through an inventory file and a talosconfig, gives the verdict and diagnoses
// the sim target gives for the same scenario.
func TestRealTargetMatchesSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each scenario twice")
	}

	for _, name := range []string{"happy-path", "half-applied-config", "stale-learner"} {
		t.Run(name, func(t *testing.T) {
			// Side by side: each run mostly waits on its Talos timers (a
			// tenth of a core each), and one after the other the three
			// took two and a half minutes of make test's longest lane.
			t.Parallel()

			dir := t.TempDir()

			// The built-in at 20x, not its 60x: its windows (stale-learner's
			// 10 Talos minutes are 10 s at 60x) with room for a loaded
			// machine, where a node in this process's cluster once took
			// longer than that to start its etcd.
			const scale = "20"

			code, out := run(t, "run", name, "--time-scale", scale, "--report-dir", filepath.Join(dir, "sim"))
			simRes := readReport(t, filepath.Join(dir, "sim", "report.json"))

			if code != exitPass || simRes.ScenarioTimeScale != 20 {
				t.Fatalf("sim run exit %d at %gx:\n%s", code, simRes.ScenarioTimeScale, out)
			}

			simOut := out

			// A cluster shaped like the scenario's, as `talchaos up --from NAME
			// --time-scale 20` makes it.
			sc, err := upScenario(upOptions{from: name, fromScale: 20})
			if err != nil {
				t.Fatal(err)
			}

			cluster, err := sim.NewCluster(context.Background(), sc, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close() //nolint:errcheck

			upDir := filepath.Join(dir, "up")
			if err := os.MkdirAll(upDir, 0o700); err != nil {
				t.Fatal(err)
			}

			if err := writeUpFiles(upDir, cluster); err != nil {
				t.Fatal(err)
			}

			code, out = run(t, "run", name, "--time-scale", scale, "--target", "real", "--inventory", filepath.Join(upDir, "inventory.yaml"),
				"--allow-destructive", "--report-dir", filepath.Join(dir, "real"))
			realRes := readReport(t, filepath.Join(dir, "real", "report.json"))

			if code != exitPass || realRes.Verdict != simRes.Verdict {
				t.Fatalf("real run exit %d verdict %s, sim verdict %s:\n%s", code, realRes.Verdict, simRes.Verdict, out)
			}

			diags := func(r []string) []string { slices.Sort(r); return slices.Compact(r) }

			var simD, realD []string
			for _, d := range simRes.Diagnoses {
				simD = append(simD, d.Code+"@"+d.Node)
			}

			for _, d := range realRes.Diagnoses {
				realD = append(realD, d.Code+"@"+d.Node)
			}

			if a, b := strings.Join(diags(simD), " "), strings.Join(diags(realD), " "); a != b {
				t.Fatalf("diagnoses differ:\n sim:  %s\n real: %s", a, b)
			}

			noKeyMaterial(t, cluster, simOut+out, filepath.Join(dir, "real"), filepath.Join(dir, "sim"))
		})
	}
}

// A destructive fault on a real cluster without --allow-destructive is refused
// before anything starts.
func TestRealTargetRefusesDestructiveFaults(t *testing.T) {
	_, dir := startUpCluster(t, "stale-learner", 60)

	code, out := run(t, "run", "stale-learner", "--target", "real", "--inventory", filepath.Join(dir, "inventory.yaml"),
		"--report-dir", filepath.Join(dir, "report"))
	if code != exitInput || !strings.Contains(out, "pass --allow-destructive") {
		t.Fatalf("exit %d, want 2 with a word on --allow-destructive:\n%s", code, out)
	}
}

// noKeyMaterial scans output and every report file for the cluster's
// secrets (every key, token and secret of its bundle and its talosconfig's key,
// base64 and decoded) and for any PEM private key.
func noKeyMaterial(t *testing.T, cluster *sim.Cluster, out string, reportDirs ...string) {
	t.Helper()

	secrets, err := secretscan.Values(cluster.Bundle(), cluster.Talosconfig())
	if err != nil {
		t.Fatal(err)
	}

	secrets = append(secrets, secretscan.Secret{Name: "a PEM private key", Value: "PRIVATE KEY"})

	texts, err := secretscan.Files(reportDirs...)
	if err != nil {
		t.Fatal(err)
	}

	texts["output"] = out

	for where, text := range texts {
		for _, hit := range secretscan.Find(where, text, secrets) {
			t.Error(hit)
		}
	}
}
