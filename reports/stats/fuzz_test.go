package stats

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/talchaos/talchaos/harness/strictjson"
)

// FuzzReadLedger feeds DecodeLedger (ReadLedger of a file's content) ledgers
// Write wrote and hostile variants of them. It must never panic: either the
// ledger is refused with *strictjson.Errors naming the file, printable on a
// terminal, or it is consistent (Validate finds nothing), comparing it takes
// no time and, written again, it reads back.
func FuzzReadLedger(f *testing.F) {
	dir := f.TempDir()

	for i, l := range []*Ledger{
		{Created: time.Date(2026, 3, 1, 2, 3, 4, 0, time.UTC), Tool: "talchaos v0.4.1", Scenarios: []Summary{summary("happy-path", 3, 3), summary("too-many-learners", 19, 20)}},
		{Scenarios: []Summary{summary("s", 0, 0)}},
		{},
	} {
		path := filepath.Join(dir, "ledger.json")
		if err := l.Write(path); err != nil {
			f.Fatal(err)
		}

		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}

		f.Add(data)

		if i == 0 {
			for _, e := range [][2]string{
				{`"runs": 3`, `"runs": -3`},
				{`"passed": 19`, `"passed": 21`},
				{`"passed": 19`, `"passd": 19`},
				{`"runs": 20`, `"runs": 1000000000000`},
				{`"rate": 0.95`, `"rate": 1e999`},
				{`"scenarios"`, `"scenarioz"`},
				{`"verdict": "fail"`, `"verdict": "\u001b[31m"`},
			} {
				f.Add([]byte(strings.Replace(string(data), e[0], e[1], 1)))
			}
		}
	}

	for _, s := range []string{
		`{"schema":"talchaos.ledger/v1","scenarios":[{"scenario":"a","runs":1000000,"passed":0,"rate":0,"rateLow":0,"rateHigh":1,"p50Ms":0,"p95Ms":0,"outcomes":[{"verdict":"fail","seeds":[1]}]}]}`,
		`{"schema":"talchaos.ledger/v1","scenarios":null}`,
		`{"schema":"talchaos.ledger/v1","scenarios":[]} {}`,
		`{"schema":"talchaos.report/v2"}`,
		`[`,
		"",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz/ledger.json"

		l, err := DecodeLedger(file, data)
		if err != nil {
			if l != nil {
				t.Fatalf("DecodeLedger returned a ledger and %v", err)
			}

			var se *strictjson.Error
			if !errors.As(err, &se) || se.File != file {
				t.Fatalf("error %v is not a *strictjson.Error naming the file", err)
			}

			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, file) || strings.ContainsFunc(line, func(r rune) bool { return !unicode.IsPrint(r) }) {
					t.Fatalf("error line %q does not start with the file or does not print", line)
				}
			}

			return
		}

		if errs := l.Validate(); len(errs) > 0 {
			t.Fatalf("DecodeLedger accepted a ledger Validate refuses: %v", errs[0])
		}

		start := time.Now()

		Compare(l, l, 0.01)

		if d := time.Since(start); d > time.Second {
			t.Fatalf("comparing the ledger with itself took %s", d)
		}

		again, err := json.Marshal(l)
		if err != nil {
			return // a time past year 9999 in a zone ahead of UTC, say
		}

		if _, err := DecodeLedger("again.json", again); err != nil {
			t.Fatalf("the ledger written again does not read back: %v\n%s", err, again)
		}
	})
}
