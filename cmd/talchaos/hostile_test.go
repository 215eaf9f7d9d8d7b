package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/result"
)

// mergeBomb is the 721-byte shape of the field report: nested merge keys under
// one node, then faults and expectations that a decoder which stops early
// would silently drop (and pass with "checks: none").
func mergeBomb() string {
	var b strings.Builder

	b.WriteString("apiVersion: talchaos/v1\nkind: Scenario\nname: bomb\ntimeScale: 60\ncluster:\n  controlPlanes: 3\n  nodes:\n")
	b.WriteString("    cp2: {<<: [&a0 {bootDelay: 0s}")

	for i := 1; i <= 7; i++ {
		b.WriteString(", &a" + string(rune('0'+i)) + " {<<: [")

		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}

			b.WriteString("*a" + string(rune('0'+i-1)))
		}

		b.WriteString("]}")
	}

	b.WriteString("]}\nfaults:\n  - {kind: power-off, node: cp1, at: 0s}\nexpect: {converged: false, voters: 0}\n")

	return b.String()
}

// Hostile and mistaken inputs are refused before anything starts, with exit
// code 2 and an error naming file, line and field, by `run` and by `--plan`;
// `run` still leaves a report.
func TestHostileScenariosExitTwo(t *testing.T) {
	const head = "apiVersion: talchaos/v1\nkind: Scenario\nname: h\n"

	for _, tc := range []struct {
		name, body, want string
	}{
		{"nested merge keys", mergeBomb(), ":8: cluster.nodes.cp2: document too large once aliases are expanded"},
		{"timeScale 0", head + "timeScale: 0\ncluster: {controlPlanes: 3}\n", ":4: timeScale: must be between 1 and 10000, got 0"},
		{"controlPlanes 2.9", head + "cluster:\n  controlPlanes: 2.9\n", `:5: cluster.controlPlanes: expected an integer, got "2.9"`},
		{"count 0.9", head + "cluster: {controlPlanes: 3}\nfaults:\n  - kind: api-fail\n    node: cp2\n    rpc: ApplyConfiguration\n    code: Unavailable\n    count: 0.9\n    at: 0s\n",
			`:10: faults[0].count: expected an integer, got "0.9"`},
		{"api-fail code OK", head + "cluster: {controlPlanes: 3}\nfaults:\n  - {kind: api-fail, node: cp2, rpc: ApplyConfiguration, code: OK, at: 0s}\n",
			":6: faults[0].code: OK is no failure"},
		{"port on api-fail", head + "cluster: {controlPlanes: 3}\nfaults:\n  - kind: api-fail\n    node: cp2\n    rpc: Bootstrap\n    code: Unavailable\n    port: talos-api\n    at: 0s\n",
			`:10: faults[0].port: "port" does not apply to kind api-fail`},
		{"rateKBps on api-fail", head + "cluster: {controlPlanes: 3}\nfaults:\n  - {kind: api-fail, node: cp2, rpc: Bootstrap, code: Unavailable, rateKBps: 8, at: 0s}\n",
			`:6: faults[0].rateKBps: "rateKBps" does not apply to kind api-fail`},
		{"node on partition", head + "cluster: {controlPlanes: 3}\nfaults:\n  - kind: partition\n    nodes: [cp1, cp2]\n    node: cp3\n    at: 0s\n",
			`:8: faults[0].node: "node" does not apply to kind partition`},
		{"MemberPromote on a worker", head + "cluster: {controlPlanes: 3, workers: 1}\nfaults:\n  - {kind: api-fail, node: w1, rpc: MemberPromote, code: Unavailable, at: 0s}\n",
			`:6: faults[0].node: "w1" is a worker`},
		{"valueBytes 2e9", head + "cluster:\n  controlPlanes: 3\n  workload: {writesPerSecond: 1, valueBytes: 2000000000}\n",
			":6: cluster.workload.valueBytes: must be between 0 and 1048576, got 2000000000"},
		{"5 MB name", "apiVersion: talchaos/v1\nkind: Scenario\nname: " + strings.Repeat("a", 5<<20) + "\ncluster: {controlPlanes: 3}\n",
			":3: name: a string of 5242880 bytes: at most 262144"},
		{"latency 2562047h", head + "cluster: {controlPlanes: 3}\nfaults:\n  - {kind: latency, node: cp2, port: etcd-peer, latency: 2562047h, at: 0s}\n",
			":6: faults[0].latency: must be between 1ms and 1m0s, got 2562047h0m0s"},
		{"maxLearners 2147483648000", head + "cluster:\n  controlPlanes: 3\n  etcd: {maxLearners: 2147483648000}\n",
			":6: cluster.etcd.maxLearners: must be between 0 and 16, got 2147483648000"},
		{"voters and learners", head + "cluster: {controlPlanes: 3}\nexpect:\n  voters: 3\n  learners: 3\n",
			":7: expect.learners: voters 3 + learners 3 is more than the 3 control planes"},
		{"a patch the machinery cannot load", head + "cluster:\n  controlPlanes: 3\n  configPatches:\n    - patch: |\n        machine: [not, a, mapping]\n",
			":7: cluster.configPatches[0].patch:"},
		{"a patch of a field of another type", head + "cluster:\n  controlPlanes: 3\n  configPatches:\n    - patch: |\n        machine:\n          install:\n            disk: {a: b}\n",
			":7: cluster.configPatches[0].patch:"},
		{"converged with a node in maintenance", head + "cluster: {controlPlanes: 3}\nexpect:\n  converged: true\n  nodesInMaintenance: [cp3]\n",
			":7: expect.nodesInMaintenance: contradicts converged: true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "s.yaml")

			if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}

			for _, args := range [][]string{{"run", file, "--report-dir", filepath.Join(dir, "report")}, {"run", file, "--plan", "--report-dir", filepath.Join(dir, "plan")}} {
				code, out := run(t, args...)
				if code != exitInput {
					t.Fatalf("%v: exit %d, want 2:\n%.2000s", args[2:], code, out)
				}

				if !strings.Contains(out, file+tc.want) {
					t.Fatalf("%v: output does not contain %q:\n%.2000s", args[2:], file+tc.want, out)
				}
			}

			r := readReport(t, filepath.Join(dir, "report", "report.json"))
			if r.Verdict != result.Error || !strings.Contains(r.Error, tc.want) {
				t.Fatalf("report verdict %q error %.300q", r.Verdict, r.Error)
			}
		})
	}
}

// A report directory that cannot be written is noticed before the run starts.
func TestUnwritableReportDirIsRefusedFirst(t *testing.T) {
	dir := t.TempDir()

	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	code, out := run(t, "run", "happy-path", "--report-dir", filepath.Join(blocker, "report"))
	if code != exitInput || !strings.Contains(out, "--report-dir") || strings.Contains(out, "running happy-path") {
		t.Fatalf("exit %d, want 2 before the run starts:\n%s", code, out)
	}
}

// `up` refuses flags out of bounds by their names, before anything starts.
func TestUpRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--time-scale", "0"}, "--time-scale: must be between 1 and 10000, got 0"},
		{[]string{"--control-planes", "0"}, "--control-planes: must be between 1 and 9, got 0"},
		{[]string{"--workers", "500"}, "--workers: must be between 0 and 100, got 500"},
		{[]string{"--talos", "v2"}, `--talos: unknown talos profile "v2"`},
	} {
		code, out := run(t, append([]string{"up", "--dir", filepath.Join(t.TempDir(), "new")}, tc.args...)...)
		if code != exitInput || !strings.Contains(out, tc.want) {
			t.Errorf("up %v: exit %d, want 2 with %q:\n%s", tc.args, code, tc.want, out)
		}
	}
}
