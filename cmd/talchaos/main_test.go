package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/syncbuf"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim/kubecp"
)

const validHead = `apiVersion: talchaos/v1
kind: Scenario
name: bad
`

// A malformed scenario exits 2 with an error naming file, line and field, and
// still leaves a report.
func TestMalformedScenarioExitsTwo(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown field", validHead + "cluster:\n  controlPlanes: 1\n  colour: blue\n", ":6: cluster.colour: unknown field \"colour\""},
		{"bad duration", validHead + "cluster:\n  controlPlanes: 1\nexpect:\n  within: ten minutes\n", ":7: expect.within: invalid duration"},
		{"missing cluster", validHead + "talos: v1.12\n", ":1: cluster: required"},
		{"unknown fault kind", validHead + "cluster:\n  controlPlanes: 1\nfaults:\n  - kind: meteor\n    node: cp1\n    at: 0s\n", ":7: faults[0].kind: unknown fault kind \"meteor\""},
		{"unknown profile", validHead + "talos: v0.9\ncluster:\n  controlPlanes: 1\n", ":4: talos: unknown talos profile \"v0.9\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "s.yaml")

			if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}

			code, stderr := run(t, "run", file, "--report-dir", filepath.Join(dir, "report"))
			if code != exitInput {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}

			if !strings.Contains(stderr, file+tc.want) {
				t.Fatalf("stderr %q does not contain %q", stderr, file+tc.want)
			}

			r := readReport(t, filepath.Join(dir, "report", "report.json"))
			if r.Verdict != result.Error || r.Error == "" {
				t.Fatalf("report verdict %q error %q", r.Verdict, r.Error)
			}
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"run", "no-such-scenario", "--report-dir", t.TempDir()},
		{"run", "happy-path", "--target", "mars", "--report-dir", t.TempDir()},
		{"frobnicate"},
		{"run", "happy-path", "--no-such-flag"},
	} {
		if code, stderr := run(t, args...); code != exitInput {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
}

func TestListNamesBuiltInsIn100Columns(t *testing.T) {
	code, out := run(t, "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}

	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("a line of %d columns: %q", n, line)
		}
	}

	for _, name := range scenarios.Names() {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` `).MatchString(out) {
			t.Errorf("list output lacks %s:\n%s", name, out)
		}
	}
}

func TestListDiagnosesIn100Columns(t *testing.T) {
	code, out := run(t, "list", "--diagnoses")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}

	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("a line of %d columns: %q", n, line)
		}
	}

	for _, c := range judge.Codes() {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.Name) + ` +` + regexp.QuoteMeta(strings.Fields(c.Doc)[0]) + ` `).MatchString(out) {
			t.Errorf("list --diagnoses lacks %s with its meaning:\n%s", c.Name, out)
		}
	}
}

func TestShowPrintsABuiltIn(t *testing.T) {
	for _, name := range scenarios.Names() {
		want, _, err := scenarios.Read(name)
		if err != nil {
			t.Fatal(err)
		}

		if code, out := run(t, "show", name); code != 0 || out != string(want) {
			t.Errorf("show %s: exit %d, output differs from the built-in:\n%s", name, code, out)
		}
	}

	if code, out := run(t, "show", "no-such-scenario"); code != exitInput || !strings.Contains(out, "talchaos list") {
		t.Errorf("show of an unknown name: exit %d, %s", code, out)
	}
}

// A report directory named after the scenario is what a user gets from
// `talchaos run happy-path --report-dir happy-path`; the second run must still
// find the built-in. ./NAME is the local file.
func TestABuiltInIsNotShadowedByALocalPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)

	for _, p := range []string{"happy-path/report.json", "too-many-learners"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(p, []byte("not a scenario"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, name := range []string{"happy-path", "too-many-learners"} {
		sc, err := loadScenario(name)
		if err != nil || sc.Name != name {
			t.Errorf("%s: %v", name, err)
		}
	}

	if _, err := loadScenario("./too-many-learners"); err == nil || !strings.Contains(err.Error(), "too-many-learners") {
		t.Errorf("./too-many-learners is the local file, which is no scenario: %v", err)
	}
}

// run executes the CLI in-process, as main does, and returns the exit code
// and what it wrote to stdout and stderr. The output is captured through the
// writers execute takes, never by swapping os.Stdout and os.Stderr, which the
// simulated nodes' loggers read while a cluster runs.
func run(t *testing.T, args ...string) (int, string) {
	t.Helper()

	var out syncbuf.Buffer

	code := execute(context.Background(), args, &out, &out)

	return code, out.String()
}

func readReport(t *testing.T, path string) *result.Result {
	t.Helper()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	var r result.Result
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}

	return &r
}

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int64
		err  bool
	}{
		{"1-3", []int64{1, 2, 3}, false},
		{"5", []int64{5}, false},
		{"2,7,9", []int64{2, 7, 9}, false},
		{"3-1", nil, true},
		{"a-b", nil, true},
		{"1,x", nil, true},
		{"1-3,7", []int64{1, 2, 3, 7}, false},
		{" 4 , 2 ", []int64{4, 2}, false},
		{"-2--1", []int64{-2, -1}, false},
		{"9223372036854775807-9223372036854775807", []int64{9223372036854775807}, false},
		{"9223372036854775806-9223372036854775807", []int64{9223372036854775806, 9223372036854775807}, false},
		{"-9223372036854775808-9223372036854775807", nil, true},
		{"0-9223372036854775807", nil, true},
		{"9223372036854775808", nil, true},
		{"1,1", nil, true},
		{"1-3,2", nil, true},
		{"", nil, true},
		{",", nil, true},
		{"1,", nil, true},
		{"1-10000", nil, false},
		{"1-10001", nil, true},
		{"1-5000,6000-11000", nil, true},
		{"1e3", nil, true},
		{"0x10", nil, true},
		{"+5", nil, true},
	} {
		if tc.want == nil && !tc.err {
			got, err := parseSeeds(tc.in)
			if err != nil || len(got) == 0 {
				t.Errorf("parseSeeds(%q) = %d seeds, %v", tc.in, len(got), err)
			}

			continue
		}

		got, err := parseSeeds(tc.in)
		if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("parseSeeds(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestReportReadsBack(t *testing.T) {
	dir := t.TempDir()

	if code, out := run(t, "run", filepath.Join(dir, "missing.yaml"), "--report-dir", dir); code != exitInput {
		t.Fatalf("exit %d: %s", code, out)
	}

	code, out := run(t, "report", dir)
	if code != exitPass || !strings.Contains(out, "ERROR") {
		t.Fatalf("report exit %d:\n%s", code, out)
	}
}

// A healthy run as a new user types it, twice into a report directory named
// after the scenario: both pass, and nothing alarming is printed (the x509
// errors of a node in maintenance are expected and stay in the history).
//
// At 5x, as a user on a busy machine runs it (--time-scale): at the
// built-in's 60x, make test's lanes once starved the run (its nodes took 17 s
// to start) until a join outlasted its Talos-time window, and at 20x twice
// until every member's health check (2 s of wall time there: its floor) kept
// failing with "context deadline exceeded" through the settle, and the run
// was rightly judged failed; at 5x the check has 3 s, the state 6 s to hold
// and 80 s to settle. What this test checks does not depend on the scale.
func TestHappyPathTwiceIntoItsOwnNameQuietly(t *testing.T) {
	t.Chdir(t.TempDir())

	for i := range 2 {
		code, out := run(t, "run", "happy-path", "--report-dir", "happy-path", "--time-scale", "5")
		if code != 0 {
			t.Fatalf("run %d: exit %d:\n%s", i+1, code, out)
		}

		for _, alarm := range []string{"x509", "unknown authority", "orchestrator.error"} {
			if strings.Contains(out, alarm) {
				t.Errorf("run %d prints %q:\n%s", i+1, alarm, out)
			}
		}
	}

	if _, err := os.Stat(filepath.Join("happy-path", "report.json")); err != nil {
		t.Error(err)
	}
}

// A scenario with Kubernetes whose kube-apiserver is not where --kube-dir
// says: exit 2, the error names the directory and the command that builds
// the binary, and the run still leaves its report.
func TestKubeDirWithoutTheBinary(t *testing.T) {
	t.Setenv(kubecp.EnvDir, "") // the flag sets it; restored after the test

	missing := filepath.Join(t.TempDir(), "no-kube")
	dir := filepath.Join(t.TempDir(), "report")

	code, out := run(t, "run", "happy-path-kubernetes", "--kube-dir", missing, "--report-dir", dir)
	if code != exitInput || !strings.Contains(out, missing) || !strings.Contains(out, "make kube") {
		t.Fatalf("exit %d, want %d naming %s and make kube:\n%s", code, exitInput, missing, out)
	}

	if r := readReport(t, filepath.Join(dir, "report.json")); r.Verdict != result.Error {
		t.Errorf("report verdict %q, want %q", r.Verdict, result.Error)
	}
}
