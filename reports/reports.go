// Package reports writes the outcome of one talchaos run: a machine-readable
// report.json (the result.Schema contract), a JUnit XML file for CI systems
// and a markdown summary, plus the plain-text terminal summary.
package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scratch"
)

// File names written by Write.
const (
	JSONFile    = "report.json"
	JUnitFile   = "junit.xml"
	SummaryFile = "summary.md"
)

// Write creates dir (and its parents) and writes report.json, junit.xml,
// summary.md and report.html into it. Each file is written atomically: it is written to a
// temporary file in dir, fsynced and renamed over the final name, so a reader
// sees either the previous version or the complete new one, never a partial
// file. report.json is written last, so its presence (with this run's content)
// means the other two are already in place.
//
// All three files are rendered before anything is written. The returned paths
// are absolute, in the order report.json, junit.xml, summary.md, report.html; on error,
// paths holds the files that were written before the failure.
//
// r is not modified. An empty r.Schema is written as result.Schema; any other
// schema is rejected.
func Write(dir string, r *result.Result) (paths []string, err error) {
	if r == nil {
		return nil, errors.New("reports: nil result")
	}

	if r.Schema != "" && r.Schema != result.Schema && r.Schema != result.SchemaV1 {
		return nil, fmt.Errorf("reports: result has schema %q, want %q", r.Schema, result.Schema)
	}

	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}

	r = clean(r)

	js, err := marshalJSON(r)
	if err != nil {
		return nil, err
	}

	ju, err := marshalJUnit(r)
	if err != nil {
		return nil, err
	}

	md := []byte(Markdown(r))

	page, err := HTML(r)
	if err != nil {
		return nil, err
	}

	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}

	// Written in this order; report.json last as the completion marker.
	files := []struct {
		name string
		data []byte
	}{
		{SummaryFile, md},
		{JUnitFile, ju},
		{HTMLFile, page},
		{JSONFile, js},
	}

	written := map[string]string{}

	for _, f := range files {
		p := filepath.Join(abs, f.name)
		if err := scratch.WriteFileAtomic(p, f.data, 0o644); err != nil {
			return ordered(written), fmt.Errorf("reports: write %s: %w", f.name, err)
		}

		written[f.name] = p
	}

	return ordered(written), nil
}

// ordered returns the written paths in the documented order.
func ordered(written map[string]string) []string {
	var out []string

	for _, name := range []string{JSONFile, JUnitFile, SummaryFile, HTMLFile} {
		if p, ok := written[name]; ok {
			out = append(out, p)
		}
	}

	return out
}

// ReadJSON reads a report.json written by Write. It fails if the file's
// schema field is neither result.Schema nor result.SchemaV1 (v2 only added
// fields, so a v1 report reads as a v2 one without them).
func ReadJSON(path string) (*result.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}

	// Check the schema first, so a report of another schema fails with a
	// schema error rather than whatever decoding error its shape causes.
	var head struct {
		Schema *string `json:"schema"`
	}

	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}

	switch {
	case head.Schema == nil:
		return nil, fmt.Errorf("reports: %s: no schema field, want %q", path, result.Schema)
	case *head.Schema != result.Schema && *head.Schema != result.SchemaV1:
		return nil, fmt.Errorf("reports: %s: schema %q, want %q or %q", path, *head.Schema, result.Schema, result.SchemaV1)
	}

	var r result.Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}

	return normalize(&r), nil
}

// marshalJSON renders report.json: indented, with a trailing newline and with
// every list present as [] rather than null.
func marshalJSON(r *result.Result) ([]byte, error) {
	data, err := json.MarshalIndent(normalize(r), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("reports: marshal %s: %w", JSONFile, err)
	}

	return append(data, '\n'), nil
}

// normalize returns a copy of r whose nil slices are empty, so they marshal
// as [] instead of null, and whose empty schema is result.Schema. r and the
// slices it points to are not modified.
func normalize(r *result.Result) *result.Result {
	c := *r

	if c.Schema == "" {
		c.Schema = result.Schema
	}

	c.Checks = nonNil(c.Checks)
	c.Diagnoses = nonNil(c.Diagnoses)
	c.Faults = nonNil(c.Faults)
	c.Schedule = nonNil(c.Schedule)
	c.Events = nonNil(c.Events)
	c.Outcome.NodesInMaintenance = nonNil(c.Outcome.NodesInMaintenance)

	// Member.PeerURLs has no omitempty either; clone before touching it.
	if slices.ContainsFunc(c.Outcome.Members, func(m result.Member) bool { return m.PeerURLs == nil }) {
		c.Outcome.Members = slices.Clone(c.Outcome.Members)
		for i := range c.Outcome.Members {
			c.Outcome.Members[i].PeerURLs = nonNil(c.Outcome.Members[i].PeerURLs)
		}
	}

	return &c
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}

	return s
}

// verdictWord is the upper-case verdict used in headings.
func verdictWord(v string) string {
	switch v {
	case result.Pass:
		return "PASS"
	case result.Fail:
		return "FAIL"
	case result.Error:
		return "ERROR"
	case "":
		return "UNKNOWN"
	default:
		return "UNKNOWN(" + v + ")"
	}
}

// failedChecks returns the checks that did not hold.
func failedChecks(r *result.Result) []result.Check {
	var out []result.Check

	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c)
		}
	}

	return out
}

// trimNL drops trailing newlines, for text embedded in a larger document.
func trimNL(s string) string {
	return string(bytes.TrimRight([]byte(s), "\r\n"))
}

// CheckDir makes sure reports can be written to dir, creating it if needed,
// before a run starts: a verdict that cannot be written is lost.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	f, err := os.CreateTemp(dir, ".talchaos-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write reports there: %w", err)
	}

	name := f.Name()
	f.Close() //nolint:errcheck

	return os.Remove(name)
}

// WriteHTML renders report.html from a report into dir, atomically: what
// `talchaos report DIR` does to re-render a run's page.
func WriteHTML(dir string, r *result.Result) (string, error) {
	page, err := HTML(r)
	if err != nil {
		return "", err
	}

	p := filepath.Join(dir, HTMLFile)

	if err := scratch.WriteFileAtomic(p, page, 0o644); err != nil {
		return "", fmt.Errorf("reports: write %s: %w", HTMLFile, err)
	}

	return p, nil
}
