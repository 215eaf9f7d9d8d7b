package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/strictjson"
)

// The reports in testdata were written by talchaos (bin/talchaos run of a
// two-control-plane scenario with a latency on a random node and a bandwidth
// fault healed on a trigger: one passing, one failing its 20 s bound; one of
// an invalid scenario; and the failing one cut down to schema v1).
var writtenReports = []string{"report-pass.json", "report-fail.json", "report-error.json", "report-v1.json"}

// Reports talchaos writes read back, and a report with a history judges
// again to what the run recorded (what `talchaos report --rejudge` does).
func TestReadWrittenReports(t *testing.T) {
	for _, name := range writtenReports {
		t.Run(name, func(t *testing.T) {
			r, err := ReadJSON(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}

			if r.History == nil || r.Source == nil {
				if name != "report-error.json" && name != "report-v1.json" {
					t.Fatal("no history or scenario copy")
				}

				return
			}

			sc, err := chaos.Parse(r.Source.Path, []byte(r.Source.Content))
			if err != nil {
				t.Fatal(err)
			}

			v := judge.Judge(*r.History, sc.Expect)
			if v.Verdict != r.Verdict || !reflect.DeepEqual(v.Checks, r.Checks) || !reflect.DeepEqual(v.Diagnoses, nonNil(r.Diagnoses)) && len(v.Diagnoses)+len(r.Diagnoses) > 0 {
				t.Errorf("rejudged %s %+v %+v, recorded %s %+v %+v", v.Verdict, v.Checks, v.Diagnoses, r.Verdict, r.Checks, r.Diagnoses)
			}
		})
	}
}

// report is a report.json as generic JSON, for a test to break.
type report map[string]any

func loadReport(t testing.TB, name string) report {
	t.Helper()

	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}

	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber() // seeds beyond 2^53 stay as they are

	var r report
	if err := d.Decode(&r); err != nil {
		t.Fatal(err)
	}

	return r
}

func (r report) obj(path ...any) map[string]any {
	var v any = map[string]any(r)

	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}

	return v.(map[string]any)
}

func (r report) entries() []any { return r.obj("history")["entries"].([]any) }

// entry is the index of the n-th history entry (from 0) with the key.
func (r report) entry(key string, n int) int {
	for i, e := range r.entries() {
		if _, ok := e.(map[string]any)[key]; ok {
			if n == 0 {
				return i
			}

			n--
		}
	}

	panic("no such entry: " + key)
}

func (r report) marshal(t testing.TB) []byte {
	t.Helper()

	data, err := json.MarshalIndent(map[string]any(r), "", "  ")
	if err != nil {
		t.Fatal(err)
	}

	return data
}

func TestReadJSONRefusesInconsistentReports(t *testing.T) {
	pass, err := os.ReadFile(filepath.Join("testdata", "report-pass.json"))
	if err != nil {
		t.Fatal(err)
	}

	// edit replaces the first occurrence of old in the passing report.
	edit := func(old, new string) func(t testing.TB) []byte {
		return func(t testing.TB) []byte {
			t.Helper()

			if !bytes.Contains(pass, []byte(old)) {
				t.Fatalf("report-pass.json lacks %q", old)
			}

			return bytes.Replace(pass, []byte(old), []byte(new), 1)
		}
	}

	// change changes the decoded passing report.
	change := func(f func(r report)) func(t testing.TB) []byte {
		return func(t testing.TB) []byte {
			r := loadReport(t, "report-pass.json")
			f(r)

			return r.marshal(t)
		}
	}

	raw := func(s string) func(testing.TB) []byte { return func(testing.TB) []byte { return []byte(s) } }

	tests := []struct {
		name string
		data func(t testing.TB) []byte
		want []string // substrings of the error, in order
	}{
		// Not a report, or not JSON.
		{"empty", raw(""), []string{"report.json:1:1: the file is empty"}},
		{"not json", raw("<html>"), []string{"report.json:1:1: not valid JSON: invalid character '<'"}},
		{"array", raw("[]"), []string{"report.json:1:1: an array where an object belongs"}},
		{"no schema", raw(`{"scenario": "x"}`), []string{"report.json:1:1: schema: missing: want talchaos.report/v2 or talchaos.report/v1"}},
		{"foreign schema", raw(`{"schema": "talchaos.ledger/v1"}`), []string{`report.json:1:12: schema: is "talchaos.ledger/v1": want talchaos.report/v2`}},
		{"schema not a string", raw(`{"schema": 2}`), []string{"schema: a number where a string belongs"}},
		{"truncated", func(testing.TB) []byte { return pass[:len(pass)/2] }, []string{"the file ends before the JSON value does"}},
		{"trailing data", func(testing.TB) []byte { return append(bytes.Clone(pass), "{}"...) }, []string{"report.json:2097:1: data after the end of the JSON value"}},

		// Strict decoding: file, line:col and path.
		{"misspelt key", edit(`"observed": {`, `"observd": {`), []string{`report.json:906:9: history.entries[10].observd: unknown field (did you mean "observed"?)`}},
		{"misspelt top-level key", edit(`"verdict"`, `"verdit"`), []string{`verdit: unknown field (did you mean "verdict"?)`, "verdict: missing"}},
		{"seed a string", edit(`"seed": 3,`, `"seed": "3",`), []string{"report.json:6:11: seed: a string where an integer belongs"}},
		{"seed too large", edit(`"seed": 3,`, `"seed": 1e30,`), []string{`seed: "1e30" is not an integer`}},
		{"duplicate key", edit(`"seed": 3,`, `"seed": 3, "seed": 4,`), []string{"report.json:6:14: seed: written twice"}},
		{"wallMs a string", edit(`"wallMs": 20,`, `"wallMs": "20",`), []string{"history.entries[0].wallMs: a string where an integer belongs"}},
		{"null scale", edit(`"scale": 60,`, `"scale": null,`), []string{"history.scale: null where a number belongs"}},
		{"scale out of float range", edit(`"scale": 60,`, `"scale": 1e999,`), []string{`history.scale: "1e999" is out of range`}},
		{"missing seed", change(func(r report) { delete(r, "seed") }), []string{"report.json:1:1: seed: missing: the field is required"}},
		{"missing target", change(func(r report) { delete(r, "target") }), []string{"target: missing"}},
		{"missing scenario", change(func(r report) { delete(r, "scenario") }), []string{"scenario: missing"}},
		{"control characters in a key", edit(`"observed": {`, "\"\\u001b]0;x\\u0007\": 1, \"observed\": {"), []string{`report.json:906:9: history.entries[10]["\x1b]0;x\a"]: unknown field`}},

		// Values out of range.
		{"empty target", change(func(r report) { r["target"] = "" }), []string{"target: is empty"}},
		{"unknown verdict", change(func(r report) { r["verdict"] = "maybe" }), []string{`verdict: is "maybe": want pass, fail or error`}},
		{"negative duration", change(func(r report) { r["durationMs"] = -1 }), []string{"durationMs: is -1"}},
		{"time scale 0.5", change(func(r report) { r["timeScale"] = 0.5 }), []string{"timeScale: is 0.5: a time scale is between 1 and 10000"}},

		// The history.
		{"scale 0", change(func(r report) { r.obj("history")["scale"] = 0 }), []string{"history.scale: is 0: a time scale is between 1 and 10000"}},
		{"scale negative", change(func(r report) { r.obj("history")["scale"] = -60 }), []string{"history.scale: is -60"}},
		{"scale huge", change(func(r report) { r.obj("history")["scale"] = 1e300 }), []string{"history.scale: is 1e+300"}},
		{"zero start", change(func(r report) { r.obj("history")["start"] = "0001-01-01T00:00:00Z" }), []string{"history.start: is the zero time"}},
		{"bad start", change(func(r report) { r.obj("history")["start"] = "yesterday" }), []string{`history.start: "\"yesterday\"" is not a time (RFC 3339)`}},
		{"no nodes", change(func(r report) { r.obj("history")["nodes"] = []any{} }), []string{"history.nodes: is empty"}},
		{"duplicate node", change(func(r report) { r.obj("history", "nodes", 1)["name"] = "cp1" }), []string{`history.nodes[1].name: node "cp1" is listed twice (also nodes[0])`}},
		{"unknown role", change(func(r report) { r.obj("history", "nodes", 1)["role"] = "boss" }), []string{`history.nodes[1].role: is "boss"`}},
		{"unknown node", change(func(r report) { r.obj("history", "entries", 3)["node"] = "cp9" }), []string{`history.entries[3].node: names node "cp9", which is not one of the history's nodes`}},
		{"entry without node", change(func(r report) { delete(r.obj("history", "entries", r.entry("log", 0)), "node") }), []string{"].node: missing: every log entry names its node"}},
		{"out of order", change(func(r report) { r.obj("history", "entries", 40)["wallMs"] = json.Number("1") }), []string{"history.entries[40].wallMs: is 1, before the previous entry's"}},
		{"negative offset", change(func(r report) { r.obj("history", "entries", 0)["wallMs"] = -5 }), []string{"history.entries[0].wallMs: is -5"}},
		{"offset past a day", change(func(r report) {
			for _, e := range r.entries() {
				e.(map[string]any)["wallMs"] = json.Number("9000000000000000000")
			}
		}), []string{"history.entries[0].wallMs: is 9000000000000000000: more than a run can last"}},
		{"talos time off", change(func(r report) { r.obj("history", "entries", 5)["talosMs"] = 1 }), []string{"history.entries[5].talosMs: is 1, but wallMs × scale is 3480"}},
		{"two kinds", change(func(r report) {
			r.obj("history", "entries", 10)["log"] = map[string]any{"source": "etcd", "text": "x"}
		}), []string{"history.entries[10]: records observed and log at once: an entry has exactly one"}},
		{"nothing", change(func(r report) { delete(r.obj("history", "entries", 0), "step") }), []string{"history.entries[0]: records nothing"}},
		{"final on a log", change(func(r report) { r.obj("history", "entries", r.entry("log", 0))["final"] = true }), []string{"].final: is set on an entry that is not an observation"}},
		{"observed of another node", change(func(r report) { r.obj("history", "entries", 10, "observed")["name"] = "cp2" }), []string{"history.entries[10].observed.name: is \"cp2\", but the entry is of node"}},
		{"unknown mode", change(func(r report) { r.obj("history", "entries", 10, "observed")["mode"] = "asleep" }), []string{`history.entries[10].observed.mode: is "asleep"`}},
		{"unknown client", change(func(r report) { r.obj("history", "entries", r.entry("call", 0), "call")["client"] = "root" }), []string{`].call.client: is "root": want insecure or talosconfig`}},
		{"unknown code", change(func(r report) { r.obj("history", "entries", r.entry("call", 0), "call")["code"] = "Fine" }), []string{`].call.code: is "Fine": not a gRPC code`}},
		{"failure on success", change(func(r report) {
			c := r.obj("history", "entries", r.entry("call", 0), "call")
			c["code"], c["failure"] = "OK", "no-answer"
		}), []string{"].call.failure: is no-answer, but the call succeeded"}},
		{"negative call duration", change(func(r report) { r.obj("history", "entries", r.entry("call", 0), "call")["durationMs"] = -1 }), []string{"].call.durationMs: is -1"}},
		{"unknown fault kind", change(func(r report) { r.obj("history", "entries", 1, "fault")["kind"] = "lag" }), []string{`history.entries[1].fault.kind: is "lag": no such fault kind`}},
		{"unknown fault phase", change(func(r report) { r.obj("history", "entries", 1, "fault")["phase"] = "begin" }), []string{`history.entries[1].fault.phase: is "begin"`}},
		{"fault event of no scheduled fault", change(func(r report) { r.obj("history", "entries", 1, "fault")["name"] = "ghost" }), []string{`history.entries[1].fault.name: fault "ghost" is not in the schedule`}},
		{"fault event on other nodes", change(func(r report) {
			r.obj("history", "entries", 1, "fault")["nodes"] = []any{"cp2"}
			r.obj("history", "entries", 1)["node"] = "cp2"
		}), []string{`history.entries[1].fault.nodes: are ["cp2"], but the schedule's fault "slow-peer" is on ["cp1"]`}},
		{"unknown trigger state", change(func(r report) { r.obj("history", "entries", r.entry("trigger", 0), "trigger")["state"] = "asleep" }), []string{`].trigger.state: is "asleep"`}},
		{"trigger of no scheduled fault", change(func(r report) { r.obj("history", "entries", r.entry("trigger", 0), "trigger")["fault"] = "ghost" }), []string{`].trigger.fault: fault "ghost" is not in the schedule`}},
		{"unknown log source", change(func(r report) { r.obj("history", "entries", r.entry("log", 0), "log")["source"] = "dmesg" }), []string{`].log.source: is "dmesg"`}},

		// The scenario copy and the schedule.
		{"sha256 of other content", change(func(r report) {
			s := r.obj("source")
			s["content"] = strings.Replace(s["content"].(string), "voters: 2", "voters: 1", 1)
		}), []string{"source.sha256: is \"", "but the scenario copy's content has sha256"}},
		{"unknown schedule kind", change(func(r report) { r.obj("schedule", 0)["kind"] = "lag" }), []string{`schedule[0].kind: is "lag": no such fault kind`}},
		{"schedule node the run did not have", change(func(r report) { r.obj("schedule", 0)["nodes"] = []any{"cp9"} }), []string{`schedule[0].nodes[0]: names node "cp9", which the run did not have`}},
		{"random resolved to the bootstrap node", change(func(r report) {
			r.obj("schedule", 0)["nodes"] = []any{"cp1"}
			for _, i := range []int{2, r.entry("fault", 2)} {
				r.obj("history", "entries", i)["node"] = "cp1"
				r.obj("history", "entries", i, "fault")["nodes"] = []any{"cp1"}
			}
		}), []string{`schedule[0].nodes[0]: is "cp1", but random resolves to a control plane of the cluster other than the bootstrap node cp1`}},
		{"fixed node changed", change(func(r report) {
			r.obj("schedule", 1)["nodes"] = []any{"cp2"}
			for _, i := range []int{1, r.entry("fault", 3)} {
				r.obj("history", "entries", i)["node"] = "cp2"
				r.obj("history", "entries", i, "fault")["nodes"] = []any{"cp2"}
			}
		}), []string{`schedule[1].nodes[0]: is "cp2", but the scenario copy's fault names cp1`}},
		{"schedule fault twice", change(func(r report) { r["schedule"] = append(r["schedule"].([]any), r.obj("schedule", 0)) }), []string{`schedule[2].name: fault "slow-api" is scheduled twice (also schedule[0])`}},
		{"schedule kind not the scenario's", change(func(r report) {
			r.obj("schedule", 0)["kind"] = "blackhole"
			for _, i := range []int{2, r.entry("fault", 2)} {
				r.obj("history", "entries", i, "fault")["kind"] = "blackhole"
			}
		}), []string{`schedule[0].kind: is "blackhole", but the scenario copy's fault "slow-api" is of kind latency`}},
		{"schedule fault not in the scenario", change(func(r report) {
			r.obj("schedule", 0)["name"] = "ghost"
			for _, i := range []int{2, r.entry("fault", 2)} {
				r.obj("history", "entries", i, "fault")["name"] = "ghost"
			}
		}), []string{`schedule[0].name: fault "ghost" is not a fault of the scenario copy`}},
		{"scenario fault not scheduled", change(func(r report) {
			r["schedule"] = r["schedule"].([]any)[1:]
			h := r.obj("history")
			var kept []any
			for _, e := range r.entries() {
				if f, ok := e.(map[string]any)["fault"].(map[string]any); !ok || f["name"] != "slow-api" {
					kept = append(kept, e)
				}
			}
			h["entries"] = kept
		}), []string{`schedule: has no resolution of the scenario copy's fault "slow-api"`}},
		{"history node not in the scenario", change(func(r report) {
			r.obj("history", "nodes", 1)["name"] = "cp7"
			for _, e := range r.entries() {
				m := e.(map[string]any)
				if m["node"] == "cp2" {
					m["node"] = "cp7"
				}
				if o, ok := m["observed"].(map[string]any); ok && o["name"] == "cp2" {
					o["name"] = "cp7"
				}
				if f, ok := m["fault"].(map[string]any); ok && f["nodes"].([]any)[0] == "cp2" {
					f["nodes"] = []any{"cp7"}
				}
			}
			r.obj("schedule", 0)["nodes"] = []any{"cp7"}
		}), []string{`history.nodes[1].name: node "cp7" is not a node of the scenario copy's cluster (cp1, cp2)`}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), JSONFile)
			if err := os.WriteFile(path, tt.data(t), 0o600); err != nil {
				t.Fatal(err)
			}

			_, err := ReadJSON(path)
			if err == nil {
				t.Fatal("ReadJSON accepted it")
			}

			checkReadError(t, err, path)

			msg := strings.ReplaceAll(err.Error(), filepath.Dir(path)+"/", "")
			rest := msg

			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error:\n%s\nlacks (in order) %q", msg, w)
				}

				rest = rest[i+len(w):]
			}
		})
	}
}

// checkReadError checks that a read error is a *strictjson.Error naming the
// file, printable on a terminal.
func checkReadError(t testing.TB, err error, path string) {
	t.Helper()

	var se *strictjson.Error
	if !errors.As(err, &se) || se.File != path {
		t.Fatalf("error %v is not a *strictjson.Error naming %s", err, path)
	}

	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, path) {
			t.Errorf("error line %q does not start with the file", line)
		}

		if strings.ContainsFunc(line, func(r rune) bool { return !unicode.IsPrint(r) && r != '\t' }) {
			t.Errorf("error line %q holds characters that do not print", line)
		}
	}
}

// A report that is not a regular file is refused at once: a FIFO is not
// waited on, a device not read until memory runs out.
func TestReadJSONNotRegular(t *testing.T) {
	dir := t.TempDir()

	fifo := filepath.Join(dir, "report.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ path, want string }{
		{fifo, "is not a regular file (a named pipe)"},
		{"/dev/zero", "is not a regular file (a character device)"},
		{dir, "is a directory"},
		{filepath.Join(dir, "missing.json"), "no such file or directory"},
	} {
		done := make(chan error, 1)

		go func() {
			_, err := ReadJSON(tc.path)
			done <- err
		}()

		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.path+": cannot read the report: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadJSON(%s): %v, want %q", tc.path, err, tc.want)
			}

			var se *strictjson.Error
			if !errors.As(err, &se) {
				t.Errorf("ReadJSON(%s): %T is not a *strictjson.Error", tc.path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadJSON(%s) blocked", tc.path)
		}
	}
}

// Every report a run writes, whatever its shape, reads back.
func TestReadJSONOfWrite(t *testing.T) {
	for _, r := range []*result.Result{emptyResult(), passResult(), failResult(), errorResult()} {
		dir := t.TempDir()
		if _, err := Write(dir, r); err != nil {
			t.Fatal(err)
		}

		if _, err := ReadJSON(filepath.Join(dir, JSONFile)); err != nil {
			t.Errorf("%s: %v", r.Scenario, err)
		}
	}
}
