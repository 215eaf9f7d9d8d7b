package reports

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/judge"
)

// FuzzReadReport feeds DecodeJSON (ReadJSON of a file's content) reports
// talchaos wrote and hostile variants of them. It must never panic: either
// the report is refused with *strictjson.Errors naming the file, printable on
// a terminal, or it is consistent (Validate finds nothing), the commands that
// read reports can use it (report's summary and page, --rejudge's judge) and,
// written again, it reads back.
func FuzzReadReport(f *testing.F) {
	for _, name := range writtenReports {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}

		f.Add(data)
	}

	// A short report with a history, a schedule and a scenario copy, on one
	// line: mutations reach every part of it.
	short := loadReport(f, "report-pass.json")
	short.obj("history")["entries"] = short.entries()[:13]
	short["events"], short["checks"] = []any{}, []any{}

	data, err := json.Marshal(map[string]any(short))
	if err != nil {
		f.Fatal(err)
	}

	f.Add(data)

	head := `{"schema":"talchaos.report/v2","scenario":"x","target":"sim","seed":1,"verdict":"pass"`
	for _, s := range []string{
		head + `}`,
		head + `,"history":{"start":"2026-01-01T00:00:00Z","scale":0,"nodes":[],"entries":[{"wallMs":1,"talosMs":1,"node":"cp1","step":"x","log":{"source":"etcd","text":""}}]}}`,
		head + `,"history":{"start":"2026-01-01T00:00:00Z","scale":1,"nodes":[{"name":"cp1","role":"controlplane","address":"a"},{"name":"cp1","role":"worker","address":"b"}],"entries":null}}`,
		head + `,"schedule":[{"name":"f","kind":"latency","nodes":["cp9"],"trigger":"","seed":18446744073709551615,"params":{"a":[[{"b":null}]]}}]}`,
		head + `,"source":{"path":"s.yaml","sha256":"00","content":"apiVersion: talchaos/v1\n"}}`,
		head + `,"seed":2}`,
		head + `,"durationMs":-1,"timeScale":1e308,"outcome":{"voters":-1,"promotions":[{"node":"cp1","learnerMs":-5,"promotedMs":-2}]}}`,
		head + `,"\u001b[2J":1}`,
		head + `} trailing`,
		`{"schema":"talchaos.report/v1"}`,
		`{"schema":"talchaos.ledger/v1","scenarios":[]}`,
		strings.Repeat(`{"a":`, 200),
		"",
		"\xff\xfe{}",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz/report.json"

		r, err := DecodeJSON(file, data)
		if err != nil {
			if r != nil {
				t.Fatalf("DecodeJSON returned a report and %v", err)
			}

			checkReadError(t, err, file)

			return
		}

		if errs := r.Validate(chaos.Known()); len(errs) > 0 {
			t.Fatalf("DecodeJSON accepted a report Validate refuses: %v", errs[0])
		}

		// What `talchaos report` prints and renders (at most about a dozen
		// time ticks however long the history).
		_ = Summary(r)

		if _, err := HTML(r); err != nil {
			t.Fatalf("HTML of a report that reads: %v", err)
		}

		// What --rejudge does with it.
		if r.History != nil && r.Source != nil {
			if sc, err := chaos.Parse(r.Source.Path, []byte(r.Source.Content)); err == nil {
				judge.Judge(*r.History, sc.Expect)
			}
		}

		// Written again, it reads back.
		again, err := marshalJSON(r)
		if err != nil {
			return // a time past year 9999 in a zone ahead of UTC, say
		}

		if _, err := DecodeJSON("again.json", again); err != nil {
			t.Fatalf("the report written again does not read back: %v\n%s", err, again)
		}
	})
}
