package reports

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/reports/stats"
)

// sampleHunt is a shard's hunt as hunt() makes one: two seeds, one failing.
func sampleHunt() *Hunt {
	runs := []HuntRun{
		{Run: stats.Run{Seed: 2, Verdict: stats.Pass, DurationMs: 700, Replay: "talchaos run invalid-config --seed 2"}, Report: "seed-2"},
		{Run: stats.Run{Seed: 4, Verdict: stats.Fail, Diagnoses: []string{"config-invalid"}, DurationMs: 900, Replay: "talchaos run invalid-config --seed 4"}, Report: "seed-4", Failure: "converged: expected false, actual true"},
	}

	sr := []stats.Run{runs[0].Run, runs[1].Run}

	return &Hunt{
		Scenario: "invalid-config", Target: "sim", Started: time.Date(2026, 11, 25, 2, 17, 0, 0, time.UTC), WallMs: 1600, Parallel: 2,
		Tool: "talchaos (devel) 0123456789ab (go1.26.1)", Summary: stats.Summarize("invalid-config", sr), Runs: runs,
		Shard: &shard.Stamp{Index: 2, Count: 2, Seeds: []int64{1, 2, 3, 4}, Scenarios: []string{"invalid-config", "pki-mismatch"}},
	}
}

func sampleCertify() *Certify {
	code0, code1 := 0, 1

	return &Certify{
		Command: []string{"./bootstrap.sh", "--wait"}, Target: "sim", Seeds: []int64{1, 2}, Started: time.Date(2026, 11, 25, 2, 17, 0, 0, time.UTC),
		WallMs: 5000, Parallel: 2, Tool: "talchaos (devel)", FailOn: []string{Silent, Hung},
		Results: []CertifyScenario{{Name: "invalid-config", Expected: Loud, Runs: []CertifyRun{
			{Scenario: "invalid-config", Seed: 1, Outcome: Loud, Expected: Loud, ExitCode: &code1, Diagnoses: []string{"config-invalid"}, Report: "invalid-config/seed-1", Replay: "talchaos certify ...", DurationMs: 800},
		}}, {Name: "happy-path", Expected: Survived, Runs: []CertifyRun{
			{Scenario: "happy-path", Seed: 2, Outcome: Survived, Expected: Survived, ExitCode: &code0, Diagnoses: []string{}, Report: "happy-path/seed-2", Replay: "talchaos certify ...", DurationMs: 8000},
		}}},
		Shard: &shard.Stamp{Index: 1, Count: 2, Seeds: []int64{1, 2}, Scenarios: []string{"happy-path", "invalid-config"}},
	}
}

func writtenFile(t testing.TB, write func(dir string) error, name string) []byte {
	t.Helper()

	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}

	return data
}

func writtenHunt(t testing.TB) []byte {
	return writtenFile(t, func(dir string) error { _, err := WriteHunt(dir, sampleHunt()); return err }, HuntJSONFile)
}

func writtenCertify(t testing.TB) []byte {
	return writtenFile(t, func(dir string) error { return WriteCertify(dir, sampleCertify()) }, CertifyJSONFile)
}

// What WriteHunt and WriteCertify write reads back as it was.
func TestHuntAndCertifyReadBack(t *testing.T) {
	h, err := DecodeHunt("hunt.json", writtenHunt(t))
	if err != nil {
		t.Fatal(err)
	}

	if h.Shard == nil || h.Shard.Index != 2 || len(h.Runs) != 2 || h.Summary.Passed != 1 || h.Runs[1].Failure == "" {
		t.Errorf("read back %+v", h)
	}

	c, err := DecodeCertify("certify.json", writtenCertify(t))
	if err != nil {
		t.Fatal(err)
	}

	if c.Shard == nil || len(c.Results) != 2 || c.Results[0].Counts[Loud] != 1 || *c.Results[0].Runs[0].ExitCode != 1 {
		t.Errorf("read back %+v", c)
	}
}

// A hunt.json or certify.json that is not what talchaos wrote is refused,
// naming file, line, column and field: merge takes them from other machines.
func TestReadbackRefusesBadFiles(t *testing.T) {
	hunt, cert := writtenHunt(t), writtenCertify(t)

	edit := func(data []byte, old, new string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			t.Helper()

			if !bytes.Contains(data, []byte(old)) {
				t.Fatalf("the file lacks %q:\n%s", old, data)
			}

			return bytes.Replace(data, []byte(old), []byte(new), 1)
		}
	}

	editLast := func(data []byte, old, new string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			i := bytes.LastIndex(data, []byte(old))
			if i < 0 {
				t.Fatalf("the file lacks %q", old)
			}

			return append(append(bytes.Clone(data[:i]), new...), data[i+len(old):]...)
		}
	}

	for _, tc := range []struct {
		name   string
		certif bool
		data   func(t *testing.T) []byte
		want   string
	}{
		{"a ledger", false, func(*testing.T) []byte { return []byte(`{"schema": "talchaos.ledger/v1", "scenarios": []}`) }, `hunt.json:1:12: schema: is "talchaos.ledger/v1": want talchaos.hunt/v1`},
		{"misspelt key", false, edit(hunt, `"parallel"`, `"paralel"`), `hunt.json:7:3: paralel: unknown field (did you mean "parallel"?)`},
		{"missing runs", false, edit(hunt, `"runs": [`, `"rns": [`), `rns: unknown field`},
		{"verdict", false, editLast(hunt, `"verdict": "fail"`, `"verdict": "meh"`), `runs[1].verdict: is "meh"`},
		{"verdict in the summary", false, edit(hunt, `"verdict": "fail"`, `"verdict": "error"`), `summary.outcomes[0]: is "error: config-invalid", but the runs make "fail: config-invalid"`},
		{"seed twice", false, edit(hunt, `"seed": 4,`, `"seed": 2,`), `runs[1].seed: is 2 after seed 2`},
		{"passed edited", false, edit(hunt, `"passed": 1,`, `"passed": 2,`), `summary.passed: is 2, but the runs make 1`},
		{"outcome seeds edited", false, edit(hunt, "\"seeds\": [\n          4\n", "\"seeds\": [\n          3\n"), `summary.outcomes[0].seeds: is [3], but the runs make [4]`},
		{"report a URL", false, edit(hunt, `"report": "seed-2"`, `"report": "javascript:alert(1)"`), `runs[0].report: is "javascript:alert(1)": want a plain relative path`},
		{"unfired unnamed", false, edit(hunt, `"report": "seed-2"`, `"report": "seed-2", "unfired": [""]`), `runs[0].unfired[0]: is empty: a fault's name`},
		{"unfired twice", false, edit(hunt, `"report": "seed-2"`, `"report": "seed-2", "unfired": ["cp1-off", "cp1-off"]`), `runs[0].unfired[1]: "cp1-off" is listed twice`},
		{"unstruck edited", false, edit(hunt, `"passed": 1,`, `"passed": 1, "unstruck": 1,`), `summary.unstruck: is 1, but the runs make 0`},
		{"report absolute", false, edit(hunt, `"report": "seed-2"`, `"report": "/etc"`), `runs[0].report: is "/etc": want a path relative`},
		{"stamp of another scenario", false, edit(hunt, `"invalid-config",
      "pki-mismatch"`, `"happy-path",
      "pki-mismatch"`), `shard.scenarios: do not hold the hunt's scenario "invalid-config"`},
		{"stamp index", false, edit(hunt, `"index": 2`, `"index": 3`), `shard.index: is 3: want 1 to 2`},
		{"stamp without seeds", false, edit(hunt, `"count": 2,`, `"count": 2, "seeds": [],`), `shard.seeds: written twice`},
		{"negative wall", false, edit(hunt, `"wallMs": 1600`, `"wallMs": -1`), `wallMs: is -1`},
		{"time scale out of range", false, edit(hunt, `"wallMs": 1600`, `"wallMs": 1600, "timeScale": 0.5`), `timeScale: is 0.5: want 1 to 10000`},
		{"time scale not the shard's", false, edit(hunt, `"wallMs": 1600`, `"wallMs": 1600, "timeScale": 30`), `timeScale: is 30x, but the shard's (shard.timeScale) is each scenario's own`},

		{"a hunt", true, func(*testing.T) []byte { return hunt }, `certify.json:2:13: schema: is "talchaos.hunt/v1": want talchaos.certify/v1`},
		{"count edited", true, edit(cert, `"loud": 1`, `"loud": 2`), `scenarios[0].counts.loud: is 2, but 1 run(s) are loud`},
		{"unknown count", true, edit(cert, `"loud": 1`, `"loud": 1, "meh": 0`), `scenarios[0].counts.meh: is not an outcome`},
		{"outcome", true, edit(cert, `"outcome": "survived"`, `"outcome": "fine"`), `scenarios[1].runs[0].outcome: is "fine"`},
		{"run of another scenario", true, edit(cert, `"scenario": "happy-path"`, `"scenario": "invalid-config"`), `scenarios[1].runs[0].scenario: is "invalid-config", in the runs of "happy-path"`},
		{"seed not run", true, edit(cert, `"seed": 2,`, `"seed": 9,`), `scenarios[1].runs[0].seed: is 9, not one of the seeds`},
		{"expected", true, edit(cert, `"expected": "loud",
      "counts"`, `"expected": "fine",
      "counts"`), `scenarios[0].expected: is "fine"`},
		{"fail-on", true, edit(cert, `"silent",`, `"quiet",`), `failOn[0]: is "quiet"`},
		{"stamp of other scenarios", true, edit(cert, `"happy-path",
      "invalid-config"`, `"happy-path",
      "pki-mismatch"`), `shard.scenarios: are not the scenarios the file lists ("happy-path, invalid-config")`},
		{"no command", true, edit(cert, `"command": [
    "./bootstrap.sh",
    "--wait"
  ]`, `"command": []`), `command: is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error

			data := tc.data(t)
			if tc.certif {
				_, err = DecodeCertify("certify.json", data)
			} else {
				_, err = DecodeHunt("hunt.json", data)
			}

			var se *strictjson.Error
			if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}

			if strings.ContainsFunc(err.Error(), func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) {
				t.Errorf("the error carries control characters: %q", err)
			}
		})
	}
}

// A FIFO is refused, not waited on.
func TestReadHuntRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "hunt.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}

	if _, err := ReadHunt(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
		t.Errorf("error %v", err)
	}

	if _, err := ReadCertify(filepath.Dir(fifo)); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("error %v", err)
	}
}

// FuzzReadHunt feeds DecodeHunt what WriteHunt wrote and hostile variants:
// it never panics, and what it accepts is consistent and written again
// reads back.
func FuzzReadHunt(f *testing.F) {
	f.Add(writtenHunt(f))
	f.Add([]byte(`{"schema":"talchaos.hunt/v1","scenario":"x","target":"sim","started":"2026-01-01T00:00:00Z","wallMs":0,"parallel":1,"summary":{"scenario":"x","runs":0,"passed":0,"rate":0,"rateLow":0,"rateHigh":1,"p50Ms":0,"p95Ms":0,"outcomes":[]},"runs":[]}`))
	f.Add([]byte(`{"schema":"talchaos.hunt/v1","shard":{"index":1,"count":1,"seeds":[1],"scenarios":["x"]}}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHunt("hunt.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "hunt.json") {
				t.Fatalf("the error does not name the file: %v", err)
			}

			return
		}

		if errs := h.Validate(); len(errs) > 0 {
			t.Fatalf("accepted, then invalid: %v", errs[0])
		}

		dir := t.TempDir()
		if _, err := WriteHunt(dir, h); err != nil {
			t.Fatal(err)
		}

		if _, err := ReadHunt(filepath.Join(dir, HuntJSONFile)); err != nil {
			t.Fatalf("written again, it does not read back: %v", err)
		}
	})
}

// FuzzReadCertify is FuzzReadHunt for certify.json.
func FuzzReadCertify(f *testing.F) {
	f.Add(writtenCertify(f))
	f.Add([]byte(`{"schema":"talchaos.certify/v1","command":["x"],"target":"sim","seeds":[1],"started":"2026-01-01T00:00:00Z","wallMs":0,"parallel":1,"tool":"","failOn":[],"scenarios":[]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCertify("certify.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "certify.json") {
				t.Fatalf("the error does not name the file: %v", err)
			}

			return
		}

		dir := t.TempDir()
		if err := WriteCertify(dir, c); err != nil {
			t.Fatal(err)
		}

		if _, err := ReadCertify(filepath.Join(dir, CertifyJSONFile)); err != nil {
			t.Fatalf("written again, it does not read back: %v", err)
		}
	})
}

// A pass whose fault never struck reads back, counts in the summary's
// unstruck and is named in summary.md.
func TestHuntUnstruckPass(t *testing.T) {
	h := sampleHunt()
	h.Runs[0].Unfired = []string{"cp1-off"}
	h.Summary = stats.Summarize(h.Scenario, []stats.Run{h.Runs[0].Run, h.Runs[1].Run})

	dir := t.TempDir()
	if _, err := WriteHunt(dir, h); err != nil {
		t.Fatal(err)
	}

	back, err := ReadHunt(filepath.Join(dir, HuntJSONFile))
	if err != nil {
		t.Fatalf("a hunt with an unstruck pass does not read back: %v", err)
	}

	if back.Summary.Unstruck != 1 || !slices.Equal(back.Runs[0].Unfired, []string{"cp1-off"}) {
		t.Errorf("read back: summary %+v, run %+v", back.Summary, back.Runs[0])
	}

	want := "1 of 1 passes had a fault that never struck (its trigger never held): they say nothing of it. Seed 2: cp1-off."
	if md := HuntSummary(h); !strings.Contains(md, want) {
		t.Errorf("summary.md lacks %q:\n%s", want, md)
	}
}

// A hunt's run voided by a stall of the host reads back, is skipped in
// junit.xml (judged neither way) and is named in summary.md, whose rate is
// of the judged runs.
func TestHuntVoidRun(t *testing.T) {
	h := sampleHunt()
	void := HuntRun{Run: stats.Run{Seed: 3, Verdict: stats.Void, Diagnoses: []string{"learner-not-promoted"}, DurationMs: 240_000,
		Replay: "talchaos run invalid-config --seed 3"}, Report: "seed-3", Failure: "the host did not run talchaos for 3m52s"}
	h.Runs = []HuntRun{h.Runs[0], void, h.Runs[1]}
	h.Summary = stats.Summarize(h.Scenario, []stats.Run{h.Runs[0].Run, h.Runs[1].Run, h.Runs[2].Run})

	dir := t.TempDir()
	if _, err := WriteHunt(dir, h); err != nil {
		t.Fatal(err)
	}

	back, err := ReadHunt(filepath.Join(dir, HuntJSONFile))
	if err != nil {
		t.Fatalf("a hunt with a void run does not read back: %v", err)
	}

	if back.Summary.Void != 1 || back.Summary.Judged() != 2 || back.Summary.Rate != 0.5 {
		t.Errorf("summary read back: %+v", back.Summary)
	}

	junit, err := HuntsJUnit([]*Hunt{h})
	if err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{`failures="1" errors="0" skipped="1"`, `<skipped message="void: the host did not run talchaos for 3m52s">`} {
		if !strings.Contains(string(junit), want) {
			t.Errorf("junit.xml lacks %q:\n%s", want, junit)
		}
	}

	md := HuntSummary(h)
	for _, want := range []string{"Expectations held for **1 of 2** seeds: rate 0.50", "**1 of 3** runs void", "| void: learner-not-promoted | 3 | 1 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
}

// Classify tells a run's certify outcome from how the command ended and
// whether the cluster converged; a run voided by a stall of the host is void
// whatever else it says.
func TestClassify(t *testing.T) {
	zero, one := 0, 1
	upgraded := 2

	for _, tc := range []struct {
		name string
		res  result.Result
		want string
	}{
		{"exit 0, converged", result.Result{Orchestrator: &result.OrchestratorEnd{ExitCode: &zero}, Outcome: result.Outcome{Converged: true}}, Survived},
		{"exit 0, not converged", result.Result{Orchestrator: &result.OrchestratorEnd{ExitCode: &zero}}, Silent},
		{"exit 1, not converged", result.Result{Orchestrator: &result.OrchestratorEnd{ExitCode: &one}}, Loud},
		{"exit 1, converged", result.Result{Orchestrator: &result.OrchestratorEnd{ExitCode: &one}, Outcome: result.Outcome{Converged: true}}, FalseAlarm},
		{"killed, converged", result.Result{Orchestrator: &result.OrchestratorEnd{}, Outcome: result.Outcome{Converged: true}}, FalseAlarm},
		{"killed, not converged", result.Result{Orchestrator: &result.OrchestratorEnd{}}, Loud},
		{"timed out", result.Result{Orchestrator: &result.OrchestratorEnd{TimedOut: true}}, Hung},
		{"exit 0, converged, one of two nodes upgraded", result.Result{Orchestrator: &result.OrchestratorEnd{ExitCode: &zero},
			Outcome: result.Outcome{Converged: true, Upgraded: &one, Nodes: make([]result.NodeOutcome, upgraded)}}, Silent},
		{"the harness failed", result.Result{Orchestrator: &result.OrchestratorEnd{ExitCode: &zero}, Error: "etcd did not start"}, RunError},
		{"no command ran", result.Result{}, RunError},
		{"voided by a stall", result.Result{Orchestrator: &result.OrchestratorEnd{ExitCode: &zero}, Error: "the host did not run talchaos", Voided: true}, Void},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(&tc.res); got != tc.want {
				t.Errorf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
}

// A certification's void run reads back, is skipped in junit.xml, is not
// marked failed in index.html and is explained in summary.md; a file with no
// void run has no void count (it reads as before).
func TestCertifyVoidRun(t *testing.T) {
	c := sampleCertify()

	dir := t.TempDir()
	if err := WriteCertify(dir, c); err != nil {
		t.Fatal(err)
	}

	if data, err := os.ReadFile(filepath.Join(dir, CertifyJSONFile)); err != nil || strings.Contains(string(data), `"void"`) {
		t.Errorf("a certification without void runs counts them (%v):\n%s", err, data)
	}

	code0 := 0
	// A worst run's codes, one per node, are listed once each in summary.md.
	c.Results[0].Runs[0].Diagnoses = []string{"node-in-maintenance", "config-invalid", "node-in-maintenance"}
	c.Results[0].Runs[0].Outcome = Loud
	c.Results[0].Expected, c.Results[0].Runs[0].Expected = Survived, Survived
	c.Results[1].Runs = append(c.Results[1].Runs, CertifyRun{Scenario: "happy-path", Seed: 1, Outcome: Void, Expected: Survived, ExitCode: &code0,
		Diagnoses: []string{"no-quorum"}, Report: "happy-path/seed-1", Replay: "talchaos certify ...", DurationMs: 9000, Error: "the host did not run talchaos for 3m52s"})
	if err := WriteCertify(dir, c); err != nil {
		t.Fatal(err)
	}

	back, err := ReadCertify(filepath.Join(dir, CertifyJSONFile))
	if err != nil {
		t.Fatalf("a certification with a void run does not read back: %v", err)
	}

	if got := back.Results[1].Counts; got[Void] != 1 || got[Survived] != 1 {
		t.Errorf("counts read back: %v", got)
	}

	for file, wants := range map[string][]string{
		JUnitFile:        {`skipped="1"`, `<skipped message="void: the host did not run talchaos for 3m52s">`},
		HuntSummaryFile:  {"1 of 3 runs void (" + VoidWhy + ")", "loud (seed 1, diagnoses: config-invalid, node-in-maintenance): "},
		CertifyIndexFile: {`<a href="happy-path/seed-1/report.html">1 void</a>`, "1 of 3 runs void"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}

		for _, want := range wants {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s lacks %q:\n%s", file, want, data)
			}
		}
	}
}

// The night's summary.md and index.html name a scenario's passes whose
// fault never struck.
func TestNightlyNamesUnstruckPasses(t *testing.T) {
	h := sampleHunt()
	h.Runs[0].Unfired = []string{"cp1-off"}
	h.Summary = stats.Summarize(h.Scenario, []stats.Run{h.Runs[0].Run, h.Runs[1].Run})

	dir := t.TempDir()
	if err := WriteNightly(dir, []*Hunt{h}, nil, false); err != nil {
		t.Fatal(err)
	}

	want := "invalid-config: 1 of 1 passes had a fault that never struck"
	for _, name := range []string{HuntSummaryFile, NightlyIndexFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}

		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q:\n%s", name, want, data)
		}
	}
}
