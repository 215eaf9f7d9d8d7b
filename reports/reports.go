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
	"reflect"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/inputfile"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/strictjson"
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

// ReadJSON reads a report.json written by Write, of schema result.Schema or
// result.SchemaV1 (v2 only added fields, so a v1 report reads as a v2 one
// without them). The file is untrusted input (downloaded from CI, attached to
// a bug report) and is read as strictly as a scenario: it must be a regular
// file of at most inputfile.MaxReportBytes; an unknown field, a key written
// twice, a value of the wrong type or out of range, a required field left out
// (schema, scenario, target, seed) and data after the JSON value are errors;
// so is a report that contradicts itself (result.Validate, history.Check:
// fault kinds checked against the catalogue), or whose schedule does not fit
// its scenario copy (every recorded fault a fault of the copy, of its kind, on
// the nodes its parameters name, "random" resolved to a control plane other
// than the bootstrap node). Every problem is a *strictjson.Error (several:
// strictjson.Errors) naming the file, the line and column and the JSON path.
func ReadJSON(path string) (*result.Result, error) {
	data, err := inputfile.Read(path, inputfile.MaxReportBytes)
	if err != nil {
		return nil, &strictjson.Error{File: path, Msg: "cannot read the report: " + inputfile.Problem(err), Err: err}
	}

	return DecodeJSON(path, data)
}

// DecodeJSON is ReadJSON of a report.json's content; file names it in errors.
func DecodeJSON(file string, data []byte) (*result.Result, error) {
	var r result.Result

	if err := strictjson.Decode(file, data, &r, reportOptions); err != nil {
		// A file of another schema, or not a report, fails with that
		// rather than with whatever its shape causes.
		if serr := strictjson.SchemaError(file, data, "a talchaos report", result.Schema, result.SchemaV1); serr != nil {
			return nil, serr
		}

		return nil, err
	}

	if r.Schema != result.Schema && r.Schema != result.SchemaV1 {
		if serr := strictjson.SchemaError(file, data, "a talchaos report", result.Schema, result.SchemaV1); serr != nil {
			return nil, serr
		}
	}

	errs := r.Validate(chaos.Known())
	if len(errs) == 0 {
		errs = checkScenarioCopy(&r)
	}

	if len(errs) > 0 {
		return nil, strictjson.Locate(file, data, errs)
	}

	return normalize(&r), nil
}

// reportOptions are the fields a report.json must have: those without which
// it cannot be judged or replayed, and those talchaos has always written
// (an empty list is written as [], an absent entry field as nothing).
var reportOptions = strictjson.Options{Required: map[reflect.Type][]string{
	reflect.TypeFor[result.Result]():           {"schema", "scenario", "target", "seed", "verdict"},
	reflect.TypeFor[result.Source]():           {"path", "sha256", "content"},
	reflect.TypeFor[result.Planned]():          {"name", "kind"},
	reflect.TypeFor[history.History]():         {"start", "scale", "nodes", "entries"},
	reflect.TypeFor[history.Node]():            {"name", "role", "address"},
	reflect.TypeFor[history.Entry]():           {"wallMs", "talosMs"},
	reflect.TypeFor[history.Call]():            {"rpc", "client", "code", "durationMs"},
	reflect.TypeFor[history.FaultEvent]():      {"name", "kind", "phase"},
	reflect.TypeFor[history.Trigger]():         {"fault", "state"},
	reflect.TypeFor[history.Log]():             {"source", "text"},
	reflect.TypeFor[history.NodeObservation](): {"name", "mode"},
}}

// checkScenarioCopy checks a report against the scenario copy it holds, when
// this talchaos can parse the copy (one it cannot is the business of the
// commands that need it): the history's nodes and the schedule's are the
// scenario's nodes; every recorded fault is a fault of the scenario, of the
// same kind, on the nodes its parameters name ("random" resolved to a control
// plane other than the bootstrap node, the same one for every parameter); a
// schedule recorded at all holds every fault of the scenario. A replay takes
// the recorded nodes and seeds instead of drawing them: a record that does
// not fit would be dropped or fail at run time.
func checkScenarioCopy(r *result.Result) []*strictjson.Error {
	if r.Source == nil {
		return nil
	}

	sc, err := chaos.Parse(r.Source.Path, []byte(r.Source.Content))
	if err != nil {
		return nil
	}

	var p strictjson.Problems

	names := sc.Cluster.NodeNames()

	if r.History != nil {
		for i, n := range r.History.Nodes {
			if !slices.Contains(names, n.Name) {
				p.Addf(strictjson.Key(strictjson.Index("history.nodes", i), "name"), "node %s is not a node of the scenario copy's cluster (%s)",
					strictjson.Quote(n.Name), strings.Join(names, ", "))
			}
		}
	}

	for i, rec := range r.Schedule {
		fp := strictjson.Index("schedule", i)

		j := slices.IndexFunc(sc.Faults, func(f scenario.Fault) bool { return f.Name == rec.Name })
		if j < 0 {
			p.Addf(strictjson.Key(fp, "name"), "fault %s is not a fault of the scenario copy", strictjson.Quote(rec.Name))

			continue
		}

		f := sc.Faults[j]
		if f.Kind != rec.Kind {
			p.Addf(strictjson.Key(fp, "kind"), "is %s, but the scenario copy's fault %s is of kind %s", strictjson.Quote(rec.Kind), strictjson.Quote(f.Name), f.Kind)

			continue
		}

		kind, ok := f.Spec.(chaos.Kind)
		if !ok {
			continue
		}

		checkRecordedNodes(&p, strictjson.Key(fp, "nodes"), rec.Nodes, chaos.NodesOf(kind), sc)
	}

	if len(r.Schedule) > 0 {
		for _, f := range sc.Faults {
			if !slices.ContainsFunc(r.Schedule, func(rec result.Planned) bool { return rec.Name == f.Name }) {
				p.Addf("schedule", "has no resolution of the scenario copy's fault %s", strictjson.Quote(f.Name))
			}
		}
	}

	return p.Errs()
}

// checkRecordedNodes checks a recorded fault's nodes against the nodes its
// parameters name in the scenario.
func checkRecordedNodes(p *strictjson.Problems, path string, got, params []string, sc *scenario.Scenario) {
	if len(got) != len(params) {
		p.Addf(path, "names %d nodes, but the scenario copy's fault names %d (%s)", len(got), len(params), strings.Join(params, ", "))

		return
	}

	random := ""

	for i, n := range got {
		switch want := params[i]; {
		case want != scenario.RandomNode:
			if n != want {
				p.Addf(strictjson.Index(path, i), "is %s, but the scenario copy's fault names %s", strictjson.Quote(n), want)
			}
		case !scenario.IsControlPlane(n) || n == sc.Orchestrator.BootstrapNode || !slices.Contains(sc.Cluster.NodeNames(), n):
			p.Addf(strictjson.Index(path, i), "is %s, but %s resolves to a control plane of the cluster other than the bootstrap node %s",
				strictjson.Quote(n), scenario.RandomNode, sc.Orchestrator.BootstrapNode)
		case random != "" && n != random:
			p.Addf(strictjson.Index(path, i), "is %s, but %s resolved to %s for the same fault", strictjson.Quote(n), scenario.RandomNode, random)
		default:
			random = n
		}
	}
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
	if dir == "" {
		return errors.New("no directory given (an empty path)")
	}

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
