package reports

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/result"
)

// JUnit XML shapes (the de-facto schema read by Jenkins, GitLab, GitHub
// reporters and friends).
type junitTestSuites struct {
	XMLName xml.Name         `xml:"testsuites"`
	Suites  []junitTestSuite `xml:"testsuite"`
}

type junitTestSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr,omitempty"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitTestCase `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	// Skipped: a hunt's run voided by a stall of the host, judged neither
	// way.
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

// junitText is element text written as CDATA, so multi-line output stays
// readable in the file (encoding/xml would escape every newline as &#xA;).
type junitText struct {
	Text string `xml:",cdata"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",cdata"`
}

// marshalJUnit renders junit.xml: one suite "talchaos" for the run, one test
// case per expectation check (so a CI reporter names the check that
// failed), and a case "run" with an <error> when the run itself failed (or
// its verdict is unknown, so it never passes silently). A run voided by a
// stall of the host has its failed checks and its "run" case <skipped>:
// it says nothing of the cluster (its exit, 3, still fails the job). The suite's
// properties say what reproduces it: seed, schedule hash, scenario hash, tool.
func marshalJUnit(r *result.Result) ([]byte, error) {
	secs := fmt.Sprintf("%.3f", float64(r.DurationMs)/1000)
	class := "talchaos." + r.Target + "." + r.Scenario

	suite := junitTestSuite{
		Name:       "talchaos",
		Time:       secs,
		Properties: junitProperties(r),
		SystemOut:  &junitText{Text: xmlSafe("replay: " + replayCmd(r) + "\n\n" + Summary(r))},
	}

	// The JUnit schema's timestamp has no zone; emit UTC if StartedAt parses.
	if t, err := time.Parse(time.RFC3339Nano, r.StartedAt); err == nil {
		suite.Timestamp = t.UTC().Format("2006-01-02T15:04:05")
	}

	for _, c := range r.Checks {
		tc := junitTestCase{Classname: class, Name: c.Name, Time: "0.000"}

		if !c.Passed {
			p := &junitProblem{
				Message: oneLine(fmt.Sprintf("%s: expected %s, actual %s", c.Name, c.Expected, c.Actual)),
				Body:    xmlSafe("replay: " + replayCmd(r) + "\n" + problemBody(r)),
			}

			if r.Voided {
				// Failed across a stall of the host: judged neither way, as
				// a hunt's void run is.
				suite.Skipped++
				p.Message = "void: " + p.Message
				tc.Skipped = p
			} else {
				suite.Failures++
				tc.Failure = p
			}
		}

		suite.Cases = append(suite.Cases, tc)
	}

	if msg, ok := runError(r); ok {
		tc := junitTestCase{Classname: class, Name: "run", Time: secs}
		p := &junitProblem{Message: msg, Body: xmlSafe(problemBody(r))}

		if r.Voided {
			suite.Skipped++
			p.Message = "void: " + msg
			tc.Skipped = p
		} else {
			suite.Errors++
			tc.Error = p
		}

		suite.Cases = append(suite.Cases, tc)
	}

	if len(suite.Cases) == 0 {
		// A run without expectations proves nothing, but says it ran.
		tc := junitTestCase{Classname: class, Name: "run", Time: secs}
		if r.Verdict == result.Fail {
			suite.Failures++
			tc.Failure = &junitProblem{Message: failureMessage(r), Body: xmlSafe(problemBody(r))}
		}

		suite.Cases = append(suite.Cases, tc)
	}

	suite.Tests = len(suite.Cases)

	out, err := xml.MarshalIndent(junitTestSuites{Suites: []junitTestSuite{suite}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("reports: marshal %s: %w", JUnitFile, err)
	}

	return append(append([]byte(xml.Header), out...), '\n'), nil
}

// runError is the <error> message of a run that did not get to a verdict of
// its own, or whose verdict is unknown.
func runError(r *result.Result) (string, bool) {
	switch r.Verdict {
	case result.Pass, result.Fail:
		return "", false
	case result.Error:
		if msg := firstLine(r.Error); msg != "" {
			return msg, true
		}

		return "harness error", true
	}

	msg := fmt.Sprintf("unknown verdict %q", r.Verdict)
	if r.Error != "" {
		msg += ": " + firstLine(r.Error)
	}

	return msg, true
}

// junitProperties identify the run: what it ran, where, with which seed and
// schedule (sha256 of the resolved schedule), and which talchaos.
func junitProperties(r *result.Result) []junitProperty {
	props := []junitProperty{
		{Name: "scenario", Value: r.Scenario},
		{Name: "target", Value: r.Target},
		{Name: "seed", Value: fmt.Sprint(r.Seed)},
		{Name: "talos", Value: r.Talos},
		{Name: "verdict", Value: r.Verdict},
		{Name: "schedule-sha256", Value: ScheduleHash(r)},
		{Name: "tool", Value: toolVersion(r)},
	}

	if r.File != "" {
		props = append(props, junitProperty{Name: "file", Value: r.File})
	}

	if r.Source != nil {
		props = append(props, junitProperty{Name: "scenario-sha256", Value: r.Source.SHA256})
	}

	return props
}

// ScheduleHash is the sha256 of the run's resolved fault schedule as
// report.json holds it: two runs with the same hash struck the same faults at
// the same triggers on the same nodes.
func ScheduleHash(r *result.Result) string {
	data, err := json.Marshal(r.Schedule)
	if err != nil {
		return ""
	}

	sum := sha256.Sum256(data)

	return hex.EncodeToString(sum[:])
}

// toolVersion is the talchaos build, with its VCS revision when known.
func toolVersion(r *result.Result) string {
	v := r.Tool.Version
	if v == "" {
		v = "unknown"
	}

	if r.Tool.Revision != "" {
		v += " " + r.Tool.Revision
		if r.Tool.Modified {
			v += "+dirty"
		}
	}

	return v
}

// failureMessage is the one-line message attribute of <failure>.
func failureMessage(r *result.Result) string {
	var parts []string

	if failed := failedChecks(r); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, c := range failed {
			names[i] = c.Name
		}

		parts = append(parts, fmt.Sprintf("%d of %d checks failed: %s",
			len(failed), len(r.Checks), strings.Join(names, ", ")))
	}

	if len(r.Diagnoses) > 0 {
		codes := make([]string, len(r.Diagnoses))
		for i, d := range r.Diagnoses {
			codes[i] = d.Code
		}

		parts = append(parts, "diagnoses: "+strings.Join(codes, ", "))
	}

	if len(parts) == 0 {
		return "scenario expectations did not hold"
	}

	return strings.Join(parts, "; ")
}

// problemBody is the text inside <failure> or <error>: the harness error if
// any, the failed checks and the diagnoses with their evidence.
func problemBody(r *result.Result) string {
	var b strings.Builder

	if r.Error != "" {
		b.WriteString("error:\n")
		writeIndented(&b, "  ", r.Error)
	}

	if failed := failedChecks(r); len(failed) > 0 {
		b.WriteString("failed checks:\n")

		for _, c := range failed {
			fmt.Fprintf(&b, "  - %s: expected %s, actual %s\n", oneLine(c.Name), oneLine(c.Expected), oneLine(c.Actual))
		}
	}

	if len(r.Diagnoses) > 0 {
		b.WriteString("diagnoses:\n")

		for _, d := range r.Diagnoses {
			fmt.Fprintf(&b, "  - %s  %s  %s\n", d.Code, orDash(d.Node), oneLine(d.Message))

			if d.Evidence != "" {
				writeIndented(&b, "      ", "evidence: "+d.Evidence)
			}
		}
	}

	return b.String()
}

// writeIndented writes s line by line, each prefixed with indent.
func writeIndented(b *strings.Builder, indent, s string) {
	for line := range strings.SplitSeq(trimNL(s), "\n") {
		b.WriteString(indent)
		b.WriteString(strings.TrimRight(line, "\r"))
		b.WriteByte('\n')
	}
}

// xmlSafe replaces characters XML 1.0 cannot hold (NUL, most C0 controls such
// as the ESC of ANSI colour codes in captured logs) with U+FFFD. encoding/xml
// does this for attributes and escaped text, but writes CDATA verbatim.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r',
			r >= 0x20 && r <= 0xD7FF,
			r >= 0xE000 && r <= 0xFFFD,
			r >= 0x10000 && r <= 0x10FFFF:
			return r
		}

		return '\uFFFD'
	}, s)
}

func firstLine(s string) string {
	s = strings.TrimLeft(s, "\r\n")
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}

	return s
}
