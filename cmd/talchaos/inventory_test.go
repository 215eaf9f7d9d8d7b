package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/result"
)

// A bad inventory, or one that lacks nodes the scenario needs, is refused
// before anything starts: `run` and `run --plan` exit 2 with an error naming
// file, line and field, and leave a report.
func TestBadInventoryExitsTwo(t *testing.T) {
	_, dir := startUpCluster(t, "happy-path", 60)

	good := filepath.Join(dir, "inventory.yaml")

	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}

	upInventory := string(data)

	// The inventory `up` writes is accepted, and --plan reads it.
	code, out := run(t, "run", "happy-path", "--target", "real", "--inventory", good, "--plan", "--report-dir", filepath.Join(dir, "plan"))
	if code != exitPass || !strings.Contains(out, "plan for happy-path on real") {
		t.Fatalf("--plan with the inventory up wrote: exit %d:\n%s", code, out)
	}

	// cp3's entry, as yaml.Marshal writes it: from "    - name: cp3" to the next node.
	cp3 := upInventory[strings.Index(upInventory, "    - name: cp3"):]
	if i := strings.Index(cp3[1:], "    - name:"); i >= 0 {
		cp3 = cp3[:i+1]
	}

	lines := strings.Count(upInventory, "\n")

	for _, tc := range []struct {
		name    string
		inv     string // the inventory's text
		talosCf bool   // remove the talosconfig it names
		want    string // in the output and the report: "FILE:LINE: FIELD: MSG" (FILE the inventory unless given)
	}{
		{name: "unknown field", inv: upInventory + "colour: blue\n",
			want: ":" + strconv.Itoa(lines+1) + `: colour: unknown field "colour"`},
		{name: "bogus apiVersion", inv: strings.Replace(upInventory, "talchaos/v1", "bogus/v9", 1),
			want: `:1: apiVersion: must be "talchaos/v1", got "bogus/v9"`},
		{name: "missing talosconfig", inv: upInventory, talosCf: true,
			want: ":3: talosconfig: open talosconfig: no such file or directory"},
		{name: "scenario needs cp3", inv: strings.Replace(upInventory, cp3, "", 1),
			want: "scenarios/happy-path.yaml:12: cluster.controlPlanes: the inventory lists 2 control planes (cp1, cp2); the scenario needs cp3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := t.TempDir()

			for _, name := range []string{"talosconfig", "cp1.yaml", "cp2.yaml", "cp3.yaml"} {
				if tc.talosCf && name == "talosconfig" {
					continue
				}

				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}

				if err := os.WriteFile(filepath.Join(bad, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}

			inv := filepath.Join(bad, "inventory.yaml")
			if err := os.WriteFile(inv, []byte(tc.inv), 0o600); err != nil {
				t.Fatal(err)
			}

			want := tc.want
			if !strings.HasPrefix(want, "scenarios/") {
				want = inv + want
			}

			for _, mode := range [][]string{nil, {"--plan"}} {
				reportDir := filepath.Join(bad, "report"+strings.Join(mode, ""))
				args := append([]string{"run", "happy-path", "--target", "real", "--inventory", inv, "--report-dir", reportDir}, mode...)

				code, out := run(t, args...)
				if code != exitInput || !strings.Contains(out, "talchaos: "+want) {
					t.Fatalf("%v: exit %d, want 2 and %q in:\n%s", mode, code, want, out)
				}

				if strings.Contains(out, "running happy-path") {
					t.Fatalf("%v: the run started:\n%s", mode, out)
				}

				r := readReport(t, filepath.Join(reportDir, "report.json"))
				if r.Verdict != result.Error || !strings.Contains(r.Error, want) {
					t.Fatalf("%v: report verdict %q error %q", mode, r.Verdict, r.Error)
				}
			}
		})
	}
}
