package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/result"
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

func TestListNamesBuiltIns(t *testing.T) {
	var out bytes.Buffer

	root := newRoot()
	root.SetArgs([]string{"list"})
	root.SetOut(&out)

	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"happy-path", "too-many-learners"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("list output lacks %s:\n%s", name, out.String())
		}
	}
}

// run executes the CLI in-process, as main does, and returns the exit code
// and what it wrote to stdout and stderr. The output is captured through the
// writers execute takes, never by swapping os.Stdout and os.Stderr, which the
// simulated nodes' loggers read while a cluster runs.
func run(t *testing.T, args ...string) (int, string) {
	t.Helper()

	var out syncBuffer

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
	} {
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
