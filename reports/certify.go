package reports

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/shard"
)

// CertifySchema is certify.json's schema.
const CertifySchema = "talchaos.certify/v1"

// Certify files.
const (
	CertifyJSONFile  = "certify.json"
	CertifyIndexFile = "index.html"
)

// What a bootstrap command did under one run (`talchaos certify`): from its
// exit status and the judged outcome of the cluster.
const (
	// Survived: exit 0 and the cluster converged (and, in a run with a
	// rolling upgrade, every node upgraded).
	Survived = scenario.CertifySurvived
	// Loud: a non-zero exit and the cluster did not converge, an honest failure.
	Loud = scenario.CertifyLoud
	// Silent: exit 0 but the cluster did not converge: the command said all
	// was well and it was not.
	Silent = "silent"
	// FalseAlarm: a non-zero exit but the cluster converged.
	FalseAlarm = "false-alarm"
	// Hung: still running when the scenario's time was up (killed).
	Hung = "hung"
	// Void: the run's expectations failed across a stall of the host that
	// ran it (result.Result.Voided): it says nothing of the command.
	Void = "void"
	// RunError: the run itself failed (the harness, not the command).
	RunError = "error"
)

// CertifyOutcomes are the outcomes, best first: a void run, which says
// nothing of the command, comes before the outcomes that fault it.
var CertifyOutcomes = []string{Survived, Loud, FalseAlarm, Void, Silent, Hung, RunError}

// Classify is a run's certify outcome: from how its orchestrator (the
// command) ended and whether the cluster converged; in a run with a rolling
// upgrade, converged means every node upgraded too.
func Classify(res *result.Result) string {
	o := res.Orchestrator
	done := res.Outcome.Converged && (res.Outcome.Upgraded == nil || *res.Outcome.Upgraded == len(res.Outcome.Nodes))

	switch {
	case res.Voided:
		return Void
	case o == nil || res.Error != "":
		return RunError
	case o.TimedOut:
		return Hung
	case o.ExitCode == nil:
		// Killed by a signal, or it never started: not an exit 0.
		if done {
			return FalseAlarm
		}

		return Loud
	case *o.ExitCode == 0 && done:
		return Survived
	case *o.ExitCode == 0:
		return Silent
	case done:
		return FalseAlarm
	}

	return Loud
}

// CertifyHeld reports whether an outcome is what the scenario expects of a
// good bootstrap, or better (surviving where failing loudly was all that was
// expected).
func CertifyHeld(outcome, expected string) bool {
	return outcome == expected || (expected == Loud && outcome == Survived)
}

// Certify is certify.json: a bootstrap command against the catalogue.
type Certify struct {
	Schema   string            `json:"schema"`
	Command  []string          `json:"command"`
	Target   string            `json:"target"`
	Seeds    []int64           `json:"seeds"`
	Started  time.Time         `json:"started"`
	WallMs   int64             `json:"wallMs"`
	Parallel int               `json:"parallel"`
	Tool     string            `json:"tool"`
	FailOn   []string          `json:"failOn"`
	Results  []CertifyScenario `json:"scenarios"`
	// Skipped are the scenarios not run, each with why.
	Skipped []CertifySkip `json:"skipped,omitempty"`
	// Shard is set in the certify.json of one shard (certify --shard):
	// which part of which run it holds.
	Shard *shard.Stamp `json:"shard,omitempty"`
}

// CertifyScenario is one scenario's runs and their counts by outcome.
type CertifyScenario struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Expected    string         `json:"expected"`
	Counts      map[string]int `json:"counts"`
	Runs        []CertifyRun   `json:"runs"`
}

// CertifyRun is one scenario × seed.
type CertifyRun struct {
	Scenario  string   `json:"scenario"`
	Seed      int64    `json:"seed"`
	Outcome   string   `json:"outcome"`
	Expected  string   `json:"expected"`
	ExitCode  *int     `json:"exitCode,omitempty"`
	Diagnoses []string `json:"diagnoses"`
	// Report is the run's report directory, relative to certify.json.
	Report     string `json:"report"`
	Replay     string `json:"replay"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
}

// CertifySkip is a scenario certify did not run.
type CertifySkip struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Worst is the scenario's worst run: the one furthest from what was
// expected (by CertifyOutcomes' order), the first such seed.
func (s CertifyScenario) Worst() (CertifyRun, bool) {
	var (
		worst CertifyRun
		found bool
	)

	for _, r := range s.Runs {
		if !found || slices.Index(CertifyOutcomes, r.Outcome) > slices.Index(CertifyOutcomes, worst.Outcome) {
			worst, found = r, true
		}
	}

	return worst, found
}

// WriteCertify writes certify.json, junit.xml (a test case per scenario ×
// seed, failing when the outcome is worse than expected), summary.md (the
// scorecard) and index.html (every run's report.html) into dir.
func WriteCertify(dir string, c *Certify) error {
	c.Schema = CertifySchema

	for i := range c.Results {
		s := &c.Results[i]
		s.Counts = map[string]int{}

		for _, o := range CertifyOutcomes {
			if o != Void { // counted only when there is one: a file without void runs reads as before
				s.Counts[o] = 0
			}
		}

		for _, r := range s.Runs {
			s.Counts[r.Outcome]++
		}
	}

	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}

	junit, err := certifyJUnit(c)
	if err != nil {
		return err
	}

	for name, content := range map[string][]byte{
		CertifyJSONFile:  append(data, '\n'),
		JUnitFile:        junit,
		HuntSummaryFile:  []byte(CertifySummary(c)),
		CertifyIndexFile: []byte(certifyIndex(c)),
	} {
		if err := scratch.WriteFileAtomic(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}

	return nil
}

func certifyJUnit(c *Certify) ([]byte, error) {
	var suites junitTestSuites

	for _, s := range c.Results {
		suite := junitTestSuite{
			Name: "talchaos certify " + s.Name, Tests: len(s.Runs),
			Timestamp:  c.Started.UTC().Format("2006-01-02T15:04:05"),
			Properties: []junitProperty{{Name: "expected", Value: s.Expected}, {Name: "target", Value: c.Target}, {Name: "tool", Value: c.Tool}},
		}

		var secs float64

		for _, r := range s.Runs {
			secs += float64(r.DurationMs) / 1000

			tc := junitTestCase{
				Classname: "talchaos.certify." + s.Name,
				Name:      fmt.Sprintf("seed %d", r.Seed),
				Time:      fmt.Sprintf("%.3f", float64(r.DurationMs)/1000),
				SystemOut: &junitText{Text: "outcome: " + r.Outcome + "\nreport: " + r.Report + "\nreplay: " + r.Replay + "\n"},
			}

			msg := fmt.Sprintf("%s, expected %s", r.Outcome, r.Expected)
			body := xmlSafe(msg + "\nexit code: " + exitCodeText(r.ExitCode) + "\ndiagnoses: " + strings.Join(r.Diagnoses, ", ") + "\n" + r.Error)

			switch {
			case r.Outcome == Void:
				suite.Skipped++
				tc.Skipped = &junitProblem{Message: "void: " + xmlSafe(firstLine(r.Error)), Body: body}
			case r.Outcome == RunError:
				suite.Errors++
				tc.Error = &junitProblem{Message: xmlSafe(firstLine(r.Error)), Body: body}
			case !CertifyHeld(r.Outcome, r.Expected):
				suite.Failures++
				tc.Failure = &junitProblem{Message: msg, Body: body}
			}

			suite.Cases = append(suite.Cases, tc)
		}

		suite.Time = fmt.Sprintf("%.3f", secs)
		suites.Suites = append(suites.Suites, suite)
	}

	out, err := xml.MarshalIndent(suites, "", "  ")
	if err != nil {
		return nil, err
	}

	return append([]byte(xml.Header), append(out, '\n')...), nil
}

func exitCodeText(code *int) string {
	if code == nil {
		return "none (killed or not started)"
	}

	return fmt.Sprint(*code)
}

// CertifySummary is the scorecard as Markdown, ready for
// $GITHUB_STEP_SUMMARY: a row per scenario with what it does, what a good
// bootstrap does there, the outcome counts, and the worst run's diagnoses
// and replay command.
func CertifySummary(c *Certify) string {
	var b strings.Builder

	fmt.Fprintf(&b, "## talchaos certify `%s`\n\n", markdownCell(strings.Join(c.Command, " ")))
	fmt.Fprintf(&b, "%d scenario(s) × %d seed(s) on %s, %d at a time, %s wall.\n\n", len(c.Results), len(c.Seeds), c.Target, c.Parallel, Millis(c.WallMs))
	b.WriteString("Outcomes: **survived** (exit 0, cluster converged), **loud** (non-zero exit, not converged: an honest failure), " +
		"**false-alarm** (non-zero exit, converged), **silent** (exit 0, not converged), **hung** (still running when the scenario's time was up).\n\n")
	b.WriteString("| scenario | what it does | expected | survived | loud | false-alarm | silent | hung | worst run |\n|---|---|---|---|---|---|---|---|---|\n")

	for _, s := range c.Results {
		worst := "-"

		if w, ok := s.Worst(); ok && !CertifyHeld(w.Outcome, w.Expected) {
			worst = fmt.Sprintf("%s (seed %d, diagnoses: %s): `%s`", w.Outcome, w.Seed, orNone(distinctCodes(w.Diagnoses)), w.Replay)
		}

		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %d | %s |\n", s.Name, markdownCell(firstSentence(s.Description)), s.Expected,
			s.Counts[Survived], s.Counts[Loud], s.Counts[FalseAlarm], s.Counts[Silent], s.Counts[Hung], markdownCell(worst))
	}

	if void, runs := c.VoidRuns(); void > 0 {
		fmt.Fprintf(&b, "\n%s\n", certifyVoidNote(void, runs))
	}

	for _, s := range c.Skipped {
		fmt.Fprintf(&b, "\nSkipped %s: %s", s.Name, markdownCell(s.Reason))
	}

	if len(c.Skipped) > 0 {
		b.WriteString("\n")
	}

	return b.String()
}

// distinctCodes is a run's diagnosis codes once each, sorted: a code
// diagnosed on three nodes is one fact in a table cell.
func distinctCodes(codes []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(codes)))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}

	return strings.Join(s, ", ")
}

// markdownCell keeps a value inside its table cell.
func markdownCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
}

func certifyIndex(c *Certify) string {
	var b strings.Builder

	b.WriteString("<!doctype html><meta charset=utf-8><title>talchaos certify</title>" +
		"<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}.fail{color:#b00}</style>" +
		"<h1>talchaos certify</h1><p><code>" + html.EscapeString(strings.Join(c.Command, " ")) + "</code></p>" +
		"<table><tr><th>scenario</th><th>expected</th><th>runs</th></tr>\n")

	for _, s := range c.Results {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>", html.EscapeString(s.Name), html.EscapeString(s.Expected))

		for _, r := range s.Runs {
			class := ""
			if r.Outcome != Void && !CertifyHeld(r.Outcome, r.Expected) {
				class = ` class="fail"`
			}

			fmt.Fprintf(&b, `<a%s href="%s/report.html">%d %s</a> `, class, html.EscapeString(filepath.ToSlash(r.Report)), r.Seed, html.EscapeString(r.Outcome))
		}

		b.WriteString("</td></tr>\n")
	}

	b.WriteString("</table>\n")

	if void, runs := c.VoidRuns(); void > 0 {
		b.WriteString("<p>" + html.EscapeString(certifyVoidNote(void, runs)) + "</p>\n")
	}

	return b.String()
}

// VoidRuns counts the void runs and all runs.
func (c *Certify) VoidRuns() (void, runs int) {
	for _, s := range c.Results {
		for _, r := range s.Runs {
			runs++

			if r.Outcome == Void {
				void++
			}
		}
	}

	return void, runs
}

func certifyVoidNote(void, runs int) string {
	return fmt.Sprintf("%d of %d runs void (%s): they say nothing of the command; run them again. %s", void, runs, VoidWhy, voidRunner)
}

// firstSentence is a description's first sentence, on one line.
func firstSentence(desc string) string {
	s := strings.Join(strings.Fields(desc), " ")

	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}

	const most = 160
	if len(s) > most {
		s = s[:most] + "…"
	}

	return s
}
