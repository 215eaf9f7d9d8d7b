package reports

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/result"
)

func emptyResult() *result.Result {
	return &result.Result{
		Schema:   result.Schema,
		Scenario: "empty",
		Target:   "sim",
		Seed:     1,
		Talos:    "v1.13.0",
		Verdict:  result.Pass,
		Replay:   "talchaos run scenarios/empty.yaml --target sim --seed 1",
	}
}

func passResult() *result.Result {
	return &result.Result{
		Schema:    result.Schema,
		Scenario:  "learner-promotion",
		File:      "scenarios/learner-promotion.yaml",
		Target:    "docker",
		Seed:      42,
		Talos:     "v1.13.9",
		TimeScale: 1,
		Verdict:   result.Pass,
		Outcome: result.Outcome{
			Converged: true,
			Voters:    3,
			Members: []result.Member{
				{ID: "8e9e05c52164694d", Hostname: "cp-1", PeerURLs: []string{"https://10.5.0.2:2380"}},
				{ID: "91bc3c398fb3c146", Hostname: "cp-2"}, // nil PeerURLs
			},
			Nodes: []result.NodeOutcome{
				{Name: "cp-1", Address: "10.5.0.2", Role: "controlplane", Stage: "running", EtcdState: "running", EtcdHealth: "healthy"},
				{Name: "cp-2", Address: "10.5.0.3", Role: "controlplane", Stage: "running", EtcdState: "running", EtcdHealth: "healthy"},
			},
		},
		Checks: []result.Check{
			{Name: "converged", Expected: "true", Actual: "true", Passed: true},
			{Name: "voters", Expected: "3", Actual: "3", Passed: true},
		},
		Events: []eventlog.Event{
			{TMs: 0, Kind: "orchestrator.apply", Msg: "apply cp-1"},
			{TMs: 1500, Node: "cp-2", Kind: "etcd.learner-added", Msg: "learner 91bc added"},
		},
		StartedAt:  "2026-03-01T10:00:00Z",
		DurationMs: 83456,
		Replay:     "talchaos run scenarios/learner-promotion.yaml --target docker --seed 42",
	}
}

func failResult() *result.Result {
	r := passResult()
	r.Scenario = "partition-during-join"
	r.Verdict = result.Fail
	r.Outcome.Converged = false
	r.Outcome.Voters = 2
	r.Outcome.Learners = 1
	r.Outcome.NodesInMaintenance = []string{"cp-3"}
	r.Outcome.Nodes = append(slices.Clone(r.Outcome.Nodes), result.NodeOutcome{
		Name: "cp-3", Address: "10.5.0.4", Role: "controlplane", Stage: "maintenance",
		APIError: "rpc error: code = Unavailable",
	})
	r.Checks = []result.Check{
		{Name: "converged", Expected: "true", Actual: "false"},
		{Name: "voters", Expected: "3", Actual: "2"},
		{Name: "no-maintenance", Expected: "[]", Actual: "[cp-3]"},
		{Name: "api-reachable", Expected: "all", Actual: "all", Passed: true},
	}
	r.Diagnoses = []result.Diagnosis{
		{Code: "LEARNER_STUCK", Node: "cp-2", Message: "learner never promoted", Evidence: "member 91bc isLearner=true at t=300s\nraft index lag 1200", TMs: 300000},
		{Code: "NODE_IN_MAINTENANCE", Node: "cp-3", Message: "node booted into maintenance <& \"quoted\" | piped>", Evidence: "stage=maintenance", TMs: 310000},
	}
	r.Faults = []result.Fault{
		{Name: "partition-cp3", Kind: "partition", Node: "cp-3", Trigger: "etcd.learner-added", StartMs: 1500, EndMs: 31500},
		{Name: "kill-cp2", Kind: "kill", Node: "cp-2", Trigger: "at:10s", StartMs: 10000, Error: "container not found"},
		{Name: "reset-cp3", Kind: "reset-node", Node: "cp-3", Trigger: "when cp-3 is learner", StartMs: -1, EndMs: -1},
	}

	return r
}

func errorResult() *result.Result {
	r := emptyResult()
	r.Scenario = "boot"
	r.Verdict = result.Error
	r.Error = "target docker: cannot create network: permission denied\nsecond line <with> & specials"
	r.DurationMs = 1234

	return r
}

// namedResult is one of the results the report tests write and read.
type namedResult struct {
	name string
	r    *result.Result
}

// results are a result of each verdict, and an empty one, each new.
func results() []namedResult {
	return []namedResult{
		{"empty", emptyResult()},
		{"pass", passResult()},
		{"fail", failResult()},
		{"error", errorResult()},
	}
}

func TestWriteFiles(t *testing.T) {
	for _, tt := range results() {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out", "nested")

			paths, err := Write(dir, tt.r)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}

			want := []string{JSONFile, JUnitFile, SummaryFile, HTMLFile}
			if len(paths) != len(want) {
				t.Fatalf("paths = %v, want %d entries", paths, len(want))
			}

			for i, p := range paths {
				if !filepath.IsAbs(p) {
					t.Errorf("path %q is not absolute", p)
				}

				if filepath.Base(p) != want[i] {
					t.Errorf("paths[%d] = %q, want base %q", i, p, want[i])
				}

				st, err := os.Stat(p)
				if err != nil {
					t.Fatalf("stat: %v", err)
				}

				if st.Size() == 0 {
					t.Errorf("%s is empty", p)
				}

				if perm := st.Mode().Perm(); perm != 0o644 {
					t.Errorf("%s mode = %v, want 0644", p, perm)
				}
			}

			// Atomic writes leave nothing but the three reports behind.
			assertDirHolds(t, dir, want)
		})
	}
}

func assertDirHolds(t *testing.T, dir string, names []string) {
	t.Helper()

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}

	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("dir holds %v, want %v", got, want)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, tt := range results() {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Write(dir, tt.r); err != nil {
				t.Fatal(err)
			}

			got, err := ReadJSON(filepath.Join(dir, JSONFile))
			if err != nil {
				t.Fatalf("ReadJSON: %v", err)
			}

			if want := normalize(tt.r); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip mismatch:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestJSONEmptyListsAndNoMutation(t *testing.T) {
	r := emptyResult()
	r.Schema = "" // filled in on write
	r.Outcome.Members = []result.Member{{ID: "1", Hostname: "cp-1"}}

	dir := t.TempDir()
	if _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}

	s := string(data)
	for _, want := range []string{
		`"schema": "` + result.Schema + `"`,
		`"diagnoses": []`,
		`"checks": []`,
		`"faults": []`,
		`"events": []`,
		`"nodesInMaintenance": []`,
		`"peerURLs": []`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report.json lacks %s:\n%s", want, s)
		}
	}

	if strings.Contains(s, "null") {
		t.Errorf("report.json contains null:\n%s", s)
	}

	if !strings.HasSuffix(s, "}\n") {
		t.Errorf("report.json does not end with a newline")
	}

	// The caller's value is untouched.
	if r.Schema != "" || r.Diagnoses != nil || r.Checks != nil || r.Faults != nil || r.Events != nil ||
		r.Outcome.NodesInMaintenance != nil || r.Outcome.Members[0].PeerURLs != nil {
		t.Errorf("Write mutated its input: %+v", r)
	}
}

func TestReadJSONErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{"wrong schema", `{"schema":"talchaos.report/v0","scenario":"x"}`, "schema"},
		{"missing schema", `{"scenario":"x"}`, "schema"},
		{"wrong schema bad shape", `{"schema":"talchaos.report/v2","seed":"not a number"}`, "schema"},
		{"not json", `report`, "invalid"},
		{"bad field type", `{"schema":"` + result.Schema + `","seed":"x"}`, "seed"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), JSONFile)
			if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}

			_, err := ReadJSON(p)
			if err == nil {
				t.Fatal("ReadJSON succeeded, want error")
			}

			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}

	if _, err := ReadJSON(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("ReadJSON of a missing file succeeded")
	}
}

func TestWriteRejectsForeignSchemaAndNil(t *testing.T) {
	r := emptyResult()
	r.Schema = "talchaos.report/v0"

	if _, err := Write(t.TempDir(), r); err == nil {
		t.Error("Write accepted a foreign schema")
	}

	if _, err := Write(t.TempDir(), nil); err == nil {
		t.Error("Write accepted a nil result")
	}
}

// junit mirrors the parts of junit.xml the tests inspect.
type junit struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Errors     int    `xml:"errors,attr"`
		Skipped    int    `xml:"skipped,attr"`
		Time       string `xml:"time,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Classname string `xml:"classname,attr"`
			Name      string `xml:"name,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"skipped"`
		} `xml:"testcase"`
		SystemOut string `xml:"system-out"`
	} `xml:"testsuite"`
}

// junit.xml has one test case per expectation check, failed ones with the
// check in the message and the diagnoses in the body; a run that erred has a
// case "run" with an <error>.
func TestJUnit(t *testing.T) {
	tests := []struct {
		name       string
		r          *result.Result
		wantCases  []string // name, "!" suffix: failed, "?" suffix: error, "~" suffix: skipped
		wantTime   string
		wantInBody []string
	}{
		{"empty", emptyResult(), []string{"run"}, "0.000", nil},
		{"pass", passResult(), []string{"converged", "voters"}, "83.456", nil},
		{
			"fail", failResult(), []string{"converged!", "voters!", "no-maintenance!", "api-reachable"}, "83.456",
			[]string{
				"replay: talchaos run",
				"converged: expected true, actual false",
				"voters: expected 3, actual 2",
				"no-maintenance: expected [], actual [cp-3]",
				"LEARNER_STUCK  cp-2  learner never promoted",
				`NODE_IN_MAINTENANCE  cp-3  node booted into maintenance <& "quoted" | piped>`,
				"evidence: member 91bc isLearner=true at t=300s",
			},
		},
		{"error", errorResult(), []string{"run?"}, "1.234", []string{"permission denied", "second line <with> & specials"}},
		{
			"error with awkward text",
			func() *result.Result {
				r := errorResult()
				r.Error = "log: \x1b[31mred\x1b[0m nul\x00 ]]> end <![CDATA[ x"
				return r
			}(),
			[]string{"run?"}, "1.234",
			[]string{"log: \uFFFD[31mred\uFFFD[0m nul\uFFFD ]]> end <![CDATA[ x"},
		},
		{"unknown verdict", func() *result.Result { r := emptyResult(); r.Verdict = ""; return r }(), []string{"run?"}, "0.000", nil},
		{"error after checks", func() *result.Result { r := passResult(); r.Verdict, r.Error = result.Error, "interrupted"; return r }(),
			[]string{"converged", "voters", "run?"}, "83.456", []string{"interrupted"}},
		{"voided by a stall", func() *result.Result {
			r := failResult()
			r.Verdict, r.Error, r.Voided = result.Error, "the host did not run talchaos for 3m52s", true
			return r
		}(), []string{"converged~", "voters~", "no-maintenance~", "api-reachable", "run~"}, "83.456", []string{"the host did not run talchaos for 3m52s"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Write(dir, tt.r); err != nil {
				t.Fatal(err)
			}

			data, err := os.ReadFile(filepath.Join(dir, JUnitFile))
			if err != nil {
				t.Fatal(err)
			}

			if !strings.HasPrefix(string(data), xml.Header) {
				t.Errorf("junit.xml lacks the XML header")
			}

			var j junit
			if err := xml.Unmarshal(data, &j); err != nil {
				t.Fatalf("junit.xml does not parse: %v\n%s", err, data)
			}

			if len(j.Suites) != 1 {
				t.Fatalf("%d suites, want 1", len(j.Suites))
			}

			s := j.Suites[0]

			var got []string

			failures, errs, skipped := 0, 0, 0

			for _, c := range s.Cases {
				name := c.Name

				switch {
				case c.Failure != nil:
					name += "!"
					failures++

					if !strings.Contains(c.Failure.Message, c.Name) {
						t.Errorf("failure message %q does not name its check", c.Failure.Message)
					}
				case c.Error != nil:
					name += "?"
					errs++
				case c.Skipped != nil:
					name += "~"
					skipped++

					if !strings.HasPrefix(c.Skipped.Message, "void: ") {
						t.Errorf("skipped message %q does not say void", c.Skipped.Message)
					}
				}

				got = append(got, name)

				if want := "talchaos." + tt.r.Target + "." + tt.r.Scenario; c.Classname != want {
					t.Errorf("classname = %q, want %q", c.Classname, want)
				}

				for _, p := range []*struct {
					Message string `xml:"message,attr"`
					Body    string `xml:",chardata"`
				}{c.Failure, c.Error, c.Skipped} {
					if p == nil {
						continue
					}

					if p.Message == "" {
						t.Error("failure/error has an empty message")
					}

					for _, want := range tt.wantInBody {
						if !strings.Contains(p.Body, want) {
							t.Errorf("%s: body lacks %q:\n%s", c.Name, want, p.Body)
						}
					}

					if strings.Contains(p.Body, "api-reachable") {
						t.Errorf("body lists a passed check:\n%s", p.Body)
					}
				}
			}

			if !slices.Equal(got, tt.wantCases) {
				t.Errorf("cases %v, want %v", got, tt.wantCases)
			}

			if s.Name != "talchaos" || s.Tests != len(s.Cases) || s.Failures != failures || s.Errors != errs || s.Skipped != skipped || s.Time != tt.wantTime {
				t.Errorf("suite = name %q tests %d failures %d errors %d skipped %d time %q, want talchaos %d %d %d %d %q",
					s.Name, s.Tests, s.Failures, s.Errors, s.Skipped, s.Time, len(s.Cases), failures, errs, skipped, tt.wantTime)
			}

			props := map[string]string{}
			for _, p := range s.Properties {
				props[p.Name] = p.Value
			}

			for _, name := range []string{"scenario", "target", "seed", "talos", "verdict", "schedule-sha256", "tool"} {
				if _, ok := props[name]; !ok {
					t.Errorf("no property %s: %v", name, props)
				}
			}

			if props["seed"] != strconv.FormatInt(tt.r.Seed, 10) || props["schedule-sha256"] != ScheduleHash(tt.r) || len(props["schedule-sha256"]) != 64 {
				t.Errorf("properties %v", props)
			}

			if !strings.Contains(s.SystemOut, "replay: "+tt.r.Replay) || !strings.Contains(s.SystemOut, xmlSafe(Summary(tt.r))) {
				t.Errorf("system-out lacks the replay command or the summary:\n%s", s.SystemOut)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name      string
		r         *result.Result
		firstLine string
		want      []string
		notWant   []string
	}{
		{
			"empty", emptyResult(),
			"PASS  empty  target=sim seed=1 talos=v1.13.0  0s",
			[]string{"outcome: not converged  voters=0 learners=0  in maintenance: none", "checks: none"},
			[]string{"diagnoses:", "faults:", "error:", "nodes:"},
		},
		{
			"pass", passResult(),
			"PASS  learner-promotion  target=docker seed=42 talos=v1.13.9  1m23s",
			[]string{
				"file: scenarios/learner-promotion.yaml  started: 2026-03-01T10:00:00Z",
				"outcome: converged  voters=3 learners=0",
				"checks: all 2 passed",
				"✓  converged  expected true  actual true",
				"NODE  ADDRESS   ROLE          STAGE    ETCD     HEALTH\n",
				"cp-1  10.5.0.2  controlplane  running  running  healthy\n",
				"events: 2 recorded",
			},
			[]string{"✗", "NOTE"},
		},
		{
			"fail", failResult(),
			"FAIL  partition-during-join  target=docker seed=42 talos=v1.13.9  1m23s",
			[]string{
				"in maintenance: cp-3",
				"checks: 3 of 4 failed",
				"✗  converged       expected true  actual false",
				"✓  api-reachable   expected all   actual all",
				"LEARNER_STUCK        cp-2  learner never promoted (at 300s)",
				"NODE_IN_MAINTENANCE  cp-3  node booted into maintenance",
				"                           evidence: member 91bc isLearner=true at t=300s\n",
				"                                     raft index lag 1200\n",
				"cp-3  10.5.0.4  controlplane  maintenance  -        -        api: rpc error",
				"partition-cp3  partition   cp-3  etcd.learner-added    1.5s → 31.5s",
				"kill-cp2       kill        cp-2  at:10s                10s → -       error: container not found",
				"reset-cp3      reset-node  cp-3  when cp-3 is learner  never → -",
			},
			[]string{"\x1b["},
		},
		{
			"error", errorResult(),
			"ERROR  boot  target=sim seed=1 talos=v1.13.0  1.23s",
			[]string{"error:\n  target docker: cannot create network: permission denied\n  second line <with> & specials\n"},
			nil,
		},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summary(tt.r)

			first, _, _ := strings.Cut(s, "\n")
			if first != tt.firstLine {
				t.Errorf("first line = %q, want %q", first, tt.firstLine)
			}

			for _, d := range tt.r.Diagnoses {
				if !strings.Contains(s, d.Code) {
					t.Errorf("summary lacks diagnosis code %s", d.Code)
				}
			}

			lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
			if last := lines[len(lines)-1]; last != "replay: "+tt.r.Replay {
				t.Errorf("last line = %q, want the replay command", last)
			}

			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("summary lacks %q:\n%s", w, s)
				}
			}

			for _, w := range tt.notWant {
				if strings.Contains(s, w) {
					t.Errorf("summary contains %q:\n%s", w, s)
				}
			}

			for i, l := range lines {
				if strings.HasSuffix(l, " ") {
					t.Errorf("line %d has trailing spaces: %q", i+1, l)
				}
			}

			if testing.Verbose() {
				t.Logf("\n%s", s)
			}
		})
	}
}

// A pass whose fault never struck says so; a fault that struck does not.
func TestSummaryUnfiredFault(t *testing.T) {
	r := passResult()
	r.Faults = []result.Fault{{Name: "cp1-off", Kind: "power-off", Node: "cp1", Trigger: "when cp1 formed", StartMs: -1, EndMs: -1},
		{Name: "slow", Kind: "latency", Trigger: "at 10s", StartMs: 10000, EndMs: 20000}}

	if s := Summary(r); !strings.Contains(s, "note: cp1-off never struck (its trigger never held): this pass says nothing of it") || strings.Contains(s, "slow never") {
		t.Errorf("unfired:\n%s", s)
	}

	r.Schedule = []result.Planned{{Name: "cp1-off", Kind: "power-off", Nodes: []string{"cp1"}, Trigger: "when cp1 formed"}}
	if page, err := HTML(r); err != nil || !strings.Contains(string(page), "Never struck</b> (their triggers never held): cp1-off.") {
		t.Errorf("report.html (%v) does not name the fault that never struck", err)
	}

	r.Faults[0].StartMs, r.Faults[0].EndMs = 5000, 9000
	if s := Summary(r); strings.Contains(s, "never struck") {
		t.Errorf("every fault struck:\n%s", s)
	}
}

// The shared IP's holder at the end is on the outcome's line.
func TestSummarySharedIP(t *testing.T) {
	r := passResult()

	r.Outcome.SharedIP = &result.SharedIP{Address: "10.5.0.10", Holder: "cp-2"}
	if s := Summary(r); !strings.Contains(s, "shared IP 10.5.0.10 held by cp-2") {
		t.Errorf("held:\n%s", s)
	}

	r.Outcome.SharedIP.Holder = ""
	if s := Summary(r); !strings.Contains(s, "shared IP 10.5.0.10 held by none") {
		t.Errorf("unheld:\n%s", s)
	}
}

func TestSummaryControlChars(t *testing.T) {
	r := errorResult()
	r.Error = "\x1b[31mboom\x1b[0m\tafter tab"
	r.Diagnoses = []result.Diagnosis{{Code: "X", Node: "cp-1", Message: "m\x07", Evidence: "\x1b[1mbold"}}

	s := Summary(r)
	if strings.ContainsAny(s, "\x1b\x07") {
		t.Errorf("summary passes control characters through: %q", s)
	}

	if !strings.Contains(s, "\uFFFD[31mboom\uFFFD[0m after tab") {
		t.Errorf("summary error line not sanitised: %q", s)
	}
}

func TestNilResult(t *testing.T) {
	if s := Summary(nil); !strings.HasPrefix(s, "ERROR") {
		t.Errorf("Summary(nil) = %q", s)
	}

	if s := Markdown(nil); !strings.Contains(s, "ERROR") {
		t.Errorf("Markdown(nil) = %q", s)
	}
}

func TestSummaryWithoutReplay(t *testing.T) {
	r := emptyResult()
	r.Replay = ""

	if s := Summary(r); !strings.HasSuffix(s, "replay: (not recorded)\n") {
		t.Errorf("summary does not end with a replay line:\n%s", s)
	}
}

func TestMarkdown(t *testing.T) {
	r := failResult()

	md := Markdown(r)
	for _, want := range []string{
		"# FAIL: `partition-during-join`",
		"- **Target:** `docker`",
		"## Checks",
		"| ✗ | converged | `true` | `false` |",
		"### `LEARNER_STUCK` on `cp-2` at 300s",
		`node booted into maintenance \<\& "quoted" \| piped\>`,
		"```text\nmember 91bc isLearner=true at t=300s\nraft index lag 1200\n```",
		"| `kill-cp2` | kill | `cp-2` | at:10s | 10s | - | container not found |",
		"| `reset-cp3` | reset-node | `cp-3` | when cp-3 is learner | never | - | - |",
		"## Replay\n\n```sh\n" + r.Replay + "\n```\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	dir := t.TempDir()
	if _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}

	if string(data) != md {
		t.Error("summary.md differs from Markdown()")
	}
}

func TestMarkdownEscaping(t *testing.T) {
	tests := []struct {
		in, code, text string
	}{
		{"plain", "`plain`", "plain"},
		{"a`b", "``a`b``", "a\\`b"},
		{"`x`", "`` `x` ``", "\\`x\\`"},
		{"a|b", "`a\\|b`", "a\\|b"},
		{"", "-", "-"},
	}

	for _, tt := range tests {
		if got := mdCode(tt.in, true); got != tt.code {
			t.Errorf("mdCode(%q) = %q, want %q", tt.in, got, tt.code)
		}

		if got := mdText(tt.in, true); got != tt.text {
			t.Errorf("mdText(%q) = %q, want %q", tt.in, got, tt.text)
		}
	}

	if got := mdFence("text", "a\n```\nb"); got != "````text\na\n```\nb\n````\n" {
		t.Errorf("mdFence = %q", got)
	}

	if got := mdFence("text", "\x1b[1mx"); got != "```text\n\uFFFD[1mx\n```\n" {
		t.Errorf("mdFence with ESC = %q", got)
	}

	if got := mdText("a\r\nb\nc", true); got != "a<br>b<br>c" {
		t.Errorf("mdText multi-line = %q", got)
	}
}

func TestWriteOverwrites(t *testing.T) {
	dir := t.TempDir()

	if _, err := Write(dir, failResult()); err != nil {
		t.Fatal(err)
	}

	r := passResult()
	if _, err := Write(dir, r); err != nil {
		t.Fatal(err)
	}

	got, err := ReadJSON(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}

	if got.Verdict != result.Pass || got.Scenario != r.Scenario {
		t.Errorf("second Write did not replace report.json: %+v", got)
	}

	assertDirHolds(t, dir, []string{JSONFile, JUnitFile, SummaryFile, HTMLFile})
}

func TestWriteErrors(t *testing.T) {
	t.Run("parent is a regular file", func(t *testing.T) {
		base := t.TempDir()

		file := filepath.Join(base, "file")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}

		for _, dir := range []string{file, filepath.Join(file, "sub")} {
			paths, err := Write(dir, passResult())
			if err == nil {
				t.Errorf("Write(%q) succeeded, want error", dir)
			}

			if len(paths) != 0 {
				t.Errorf("Write(%q) reported paths %v", dir, paths)
			}
		}
	})

	t.Run("rename fails, temp file removed", func(t *testing.T) {
		dir := t.TempDir()

		// A non-empty directory where report.json should go makes the
		// final rename fail after the other two files are written.
		blocker := filepath.Join(dir, JSONFile)
		if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
			t.Fatal(err)
		}

		paths, err := Write(dir, failResult())
		if err == nil {
			t.Fatal("Write succeeded, want error")
		}

		if !strings.Contains(err.Error(), JSONFile) {
			t.Errorf("error %q does not name %s", err, JSONFile)
		}

		want := []string{filepath.Join(dir, JUnitFile), filepath.Join(dir, SummaryFile), filepath.Join(dir, HTMLFile)}
		if !slices.Equal(paths, want) {
			t.Errorf("paths = %v, want %v", paths, want)
		}

		assertDirHolds(t, dir, []string{JSONFile, JUnitFile, SummaryFile, HTMLFile})
	})
}

func TestFormatting(t *testing.T) {
	durations := []struct {
		ms   int64
		want string
	}{
		{0, "0s"},
		{850, "850ms"},
		{1234, "1.23s"},
		{59999, "1m0s"},
		{83456, "1m23s"},
		{3723000, "1h2m3s"},
	}

	for _, tt := range durations {
		if got := fmtDuration(tt.ms); got != tt.want {
			t.Errorf("fmtDuration(%d) = %q, want %q", tt.ms, got, tt.want)
		}
	}

	seconds := []struct {
		ms   int64
		want string
	}{
		{0, "0s"},
		{1500, "1.5s"},
		{12345, "12.345s"},
		{300000, "300s"},
	}

	for _, tt := range seconds {
		if got := fmtSeconds(tt.ms); got != tt.want {
			t.Errorf("fmtSeconds(%d) = %q, want %q", tt.ms, got, tt.want)
		}
	}
}
