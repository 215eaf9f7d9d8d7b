package reports

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/reports/stats"
)

// hostileURLs carry a credential each (the secret contains "Zq7"), in the
// shapes errors and command output show URLs in.
var hostileURLs = []string{
	"https://root:Zq7pw-userinfo@pve:8006/api2/json",
	"https://root@pam:Zq7pw%40with%3Aescapes@pve:8006",
	"https://root:Zq7p@ss:w0rd@[fd00::1]:8006/x",
	`Get "https://pve:8006/api2/json/nodes?password=Zq7pw-query&x=1": dial tcp: connection refused`,
	"https://pve/#access_token=Zq7pw-fragment",
	"https://h/login?next=https%3A%2F%2Fu%3AZq7pw-encoded%40h2%2F",
	"Authorization: PVEAPIToken=root@pam!talchaos=Zq7pw-header-0000",
	`parse "https://root:Zq7pw/slash@pve": invalid port ":Zq7pw" after host`,
}

// hostileResult holds a hostile URL in every kind of field a writer renders.
func hostileResult() *result.Result {
	r := failResult()
	u := strings.Join(hostileURLs, " | ")

	r.Verdict = result.Error
	r.Error = "provision real: " + u
	r.File = u
	r.Replay = "talchaos run x --target real --inventory " + u
	r.Description = u
	r.Source = &result.Source{Path: "s.yaml", Content: "description: " + u}
	r.Checks = append(r.Checks, result.Check{Name: "c", Expected: u, Actual: u})
	r.Diagnoses = append(r.Diagnoses, result.Diagnosis{Code: "X", Node: "cp-1", Message: u, Evidence: u})
	r.Faults = append(r.Faults, result.Fault{Name: "f", Kind: "power-off", Node: "cp-1", Error: u})
	r.Schedule = []result.Planned{{Name: "f", Kind: "power-off", Params: map[string]any{"url": u}}}
	r.Events = append(r.Events, eventlog.Event{TMs: 2000, Node: "cp-1", Kind: "orchestrator.exec", Msg: "stderr: " + u})
	r.Outcome.Nodes[0].APIError = u
	r.History = &history.History{
		Nodes: []history.Node{{Name: "cp-1", Role: "controlplane", Address: "10.5.0.2"}},
		Entries: []history.Entry{
			{WallMs: 10, Node: "cp-1", Call: &history.Call{RPC: "ApplyConfiguration", Client: "insecure", Code: "Unavailable", Message: u}},
			{WallMs: 20, Node: "cp-1", Log: &history.Log{Source: "machined", Text: u}},
			{WallMs: 30, Node: "cp-1", Observed: &history.NodeObservation{Name: "cp-1", Mode: "down", APIError: u}},
			{WallMs: 40, Node: "cp-1", Fault: &history.FaultEvent{Name: "f", Kind: "power-off", Phase: "error", Error: u}},
			{WallMs: 50, Step: u},
		},
	}

	return r
}

func assertNoCredential(t *testing.T, where, text string) {
	t.Helper()

	if i := strings.Index(text, "Zq7"); i >= 0 {
		t.Errorf("%s holds a credential: ...%s...", where, text[max(0, i-80):min(len(text), i+40)])
	}
}

// No writer puts a credential carried by a URL or a header in a file or on a
// terminal, wherever the result holds it, and the caller's result is left as
// it was.
func TestWritersScrubCredentials(t *testing.T) {
	r := hostileResult()

	before, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()

	paths, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}

	if len(paths) != 4 {
		t.Fatalf("wrote %v", paths)
	}

	again := t.TempDir()

	page, err := WriteHTML(again, r)
	if err != nil {
		t.Fatal(err)
	}

	paths = append(paths, page)

	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}

		assertNoCredential(t, filepath.Base(p), string(data))
	}

	// What is not a secret is still there.
	data, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(string(data), "https://root:"+result.Redacted+"@pve:8006/api2/json") {
		t.Errorf("report.json lost the URL around the password:\n%.3000s", data)
	}

	html, err := HTML(r)
	if err != nil {
		t.Fatal(err)
	}

	assertNoCredential(t, "HTML", string(html))
	assertNoCredential(t, "Summary", Summary(r))
	assertNoCredential(t, "Markdown", Markdown(r))

	for _, e := range r.Events {
		assertNoCredential(t, "ProgressLine", ProgressLine(e))
	}

	after, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}

	if string(before) != string(after) {
		t.Error("the writers modified the caller's result")
	}
}

// hunt.json, the hunt's junit.xml and summary.md, and the junit.xml of
// several hunts (nightly's) hold no credential either.
func TestHuntWritersScrubCredentials(t *testing.T) {
	u := strings.Join(hostileURLs, " | ")
	run := stats.Run{Seed: 1, Verdict: stats.Error, DurationMs: 10, Replay: "talchaos run x --inventory " + u}
	h := &Hunt{
		Scenario: "x", Target: "real", Started: time.Unix(0, 0), Tool: u,
		Summary: stats.Summarize("x", []stats.Run{run}),
		Runs:    []HuntRun{{Run: run, Report: "seed-1", Failure: "provision real: " + u}},
	}

	dir := t.TempDir()

	paths, err := WriteHunt(dir, h)
	if err != nil {
		t.Fatal(err)
	}

	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}

		assertNoCredential(t, filepath.Base(p), string(data))
	}

	junit, err := HuntsJUnit([]*Hunt{h, h})
	if err != nil {
		t.Fatal(err)
	}

	assertNoCredential(t, "HuntsJUnit", string(junit))
	assertNoCredential(t, "HuntSummary", HuntSummary(h))
}
