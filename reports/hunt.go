package reports

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/reports/stats"
)

// HuntSchema names the format of hunt.json.
const HuntSchema = "talchaos.hunt/v1"

// Hunt is one scenario run over many seeds: what `talchaos hunt` writes.
type Hunt struct {
	Schema   string    `json:"schema"`
	Scenario string    `json:"scenario"`
	Target   string    `json:"target"`
	Started  time.Time `json:"started"`
	WallMs   int64     `json:"wallMs"`
	Parallel int       `json:"parallel"`
	Tool     string    `json:"tool,omitempty"`
	// TimeScale is the hunt's --time-scale, every seed's (0: the scenario's
	// own, which each seed's report records).
	TimeScale float64 `json:"timeScale,omitempty"`
	// Shard is set in the hunt.json of one shard (hunt or nightly --shard):
	// which part of which run it holds. talchaos merge refuses shards of
	// different runs or builds and combines the others.
	Shard *shard.Stamp `json:"shard,omitempty"`
	// Summary is the reproduction rate with its Wilson 95 % interval, the
	// p50/p95 time to the outcome and the distinct outcomes.
	Summary stats.Summary `json:"summary"`
	// Runs are the seeds in order, each with its report directory.
	Runs []HuntRun `json:"runs"`
}

// HuntRun is one seed of a hunt.
type HuntRun struct {
	stats.Run

	Report  string `json:"report"`            // the seed's report directory, relative to the hunt's
	Failure string `json:"failure,omitempty"` // the first failed check or the run's error
}

// Hunt files.
const (
	HuntJSONFile    = "hunt.json"
	HuntSummaryFile = "summary.md"
)

// WriteHunt writes hunt.json, junit.xml (a test case per seed) and summary.md
// into dir, next to the seeds' report directories.
func WriteHunt(dir string, h *Hunt) ([]string, error) {
	h.Schema = HuntSchema
	h = cleanHunt(h)

	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, err
	}

	junit, err := marshalHuntJUnit(h)
	if err != nil {
		return nil, err
	}

	files := []struct {
		name string
		data []byte
	}{{HuntJSONFile, append(data, '\n')}, {JUnitFile, junit}, {HuntSummaryFile, []byte(HuntSummary(h))}}

	paths := make([]string, 0, len(files))

	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := scratch.WriteFileAtomic(p, f.data, 0o644); err != nil {
			return paths, err
		}

		paths = append(paths, p)
	}

	return paths, nil
}

func marshalHuntJUnit(h *Hunt) ([]byte, error) { return HuntsJUnit([]*Hunt{h}) }

// HuntsJUnit is junit.xml for hunts: a test suite per hunt (scenario), a test
// case per seed.
func HuntsJUnit(hunts []*Hunt) ([]byte, error) {
	var suites junitTestSuites

	for _, h := range hunts {
		suites.Suites = append(suites.Suites, huntSuite(cleanHunt(h)))
	}

	out, err := xml.MarshalIndent(suites, "", "  ")
	if err != nil {
		return nil, err
	}

	return append([]byte(xml.Header), append(out, '\n')...), nil
}

func huntSuite(h *Hunt) junitTestSuite {
	suite := junitTestSuite{
		Name:      "talchaos hunt " + h.Scenario,
		Tests:     len(h.Runs),
		Time:      fmt.Sprintf("%.3f", float64(h.WallMs)/1000),
		Timestamp: h.Started.UTC().Format("2006-01-02T15:04:05"),
		Properties: []junitProperty{
			{Name: "target", Value: h.Target}, {Name: "parallel", Value: fmt.Sprint(h.Parallel)},
			{Name: "rate", Value: fmt.Sprintf("%.4f", h.Summary.Rate)},
			{Name: "rate-95-interval", Value: fmt.Sprintf("%.4f-%.4f", h.Summary.Low, h.Summary.High)},
			{Name: "tool", Value: h.Tool},
		},
	}

	if h.TimeScale != 0 {
		suite.Properties = append(suite.Properties, junitProperty{Name: "time-scale", Value: shard.ScaleText(h.TimeScale)})
	}

	for _, r := range h.Runs {
		c := junitTestCase{
			Classname: "talchaos.hunt." + h.Scenario,
			Name:      fmt.Sprintf("seed %d", r.Seed),
			Time:      fmt.Sprintf("%.3f", float64(r.DurationMs)/1000),
			SystemOut: &junitText{Text: "report: " + r.Report + "\nreplay: " + r.Replay + "\n"},
		}

		msg := xmlSafe(firstLine(r.Failure))

		switch r.Verdict {
		case stats.Pass:
		case stats.Void:
			suite.Skipped++
			c.Skipped = &junitProblem{Message: "void: " + msg, Body: xmlSafe(r.Failure)}
		case stats.Error:
			suite.Errors++
			c.Error = &junitProblem{Message: msg, Body: xmlSafe(r.Failure)}
		default:
			suite.Failures++
			c.Failure = &junitProblem{Message: msg, Body: xmlSafe(r.Failure + "\ndiagnoses: " + strings.Join(r.Diagnoses, ", "))}
		}

		suite.Cases = append(suite.Cases, c)
	}

	return suite
}

// HuntSummary is the hunt as Markdown, ready for $GITHUB_STEP_SUMMARY.
func HuntSummary(h *Hunt) string {
	h = cleanHunt(h)
	s := h.Summary

	var b strings.Builder

	fmt.Fprintf(&b, "## talchaos hunt `%s` on %s\n\n", h.Scenario, h.Target)
	fmt.Fprintf(&b, "Expectations held for **%d of %d** seeds: rate %.2f, Wilson 95 %% interval %.2f–%.2f. "+
		"Time to the outcome p50 %s, p95 %s. %d at a time, %s wall.\n\n",
		s.Passed, s.Judged(), s.Rate, s.Low, s.High, Millis(s.P50Ms), Millis(s.P95Ms), h.Parallel, Millis(h.WallMs))

	if s.Void > 0 {
		fmt.Fprintf(&b, "%s\n\n", VoidNote(s))
	}

	if s.Unstruck > 0 {
		fmt.Fprintf(&b, "%s\n\n", UnstruckNote(h))
	}

	if h.TimeScale != 0 {
		fmt.Fprintf(&b, "Every seed at time scale %s (`--time-scale`).\n\n", shard.ScaleText(h.TimeScale))
	}

	b.WriteString("| outcome | seeds | count | replay |\n|---|---|---|---|\n")

	for _, o := range s.Outcomes {
		seeds := make([]string, len(o.Seeds))
		for i, sd := range o.Seeds {
			seeds[i] = fmt.Sprint(sd)
		}

		fmt.Fprintf(&b, "| %s | %s | %d | `%s` |\n", mdCell(o.Key()), strings.Join(seeds, " "), len(o.Seeds), mdCell(o.Replay))
	}

	return b.String()
}

// VoidWhy is what makes a run void, as every text that counts void runs
// says it.
const VoidWhy = "the host did not run talchaos for a Talos minute or more while their expectations failed"

// voidRunner ends every note on void runs: what many of them mean.
const voidRunner = "Many void runs mean an overloaded or paused runner."

// VoidNote says that some of a scenario's runs were voided by stalls of the
// host, and what that means for its numbers.
func VoidNote(s stats.Summary) string {
	return fmt.Sprintf("**%d of %d** runs void (%s): they say nothing of the scenario; the rate and the times are of the other %d. %s",
		s.Void, s.Runs, VoidWhy, s.Judged(), voidRunner)
}

// UnstruckNote says which of a hunt's passes had a fault that never struck,
// and which: "2 of 5 passes had a fault that never struck (its trigger
// never held): they say nothing of it. Seed 3: cp1-off; seed 4: cp1-off."
func UnstruckNote(h *Hunt) string {
	var seeds []string

	for _, r := range h.Runs {
		if r.Verdict == stats.Pass && len(r.Unfired) > 0 {
			seeds = append(seeds, fmt.Sprintf("seed %d: %s", r.Seed, strings.Join(r.Unfired, ", ")))
		}
	}

	return fmt.Sprintf("%d of %d passes had a fault that never struck (its trigger never held): they say nothing of it. %s.",
		h.Summary.Unstruck, h.Summary.Passed, upperFirst(strings.Join(seeds, "; ")))
}

// upperFirst is s with its first letter in upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}

	return strings.ToUpper(s[:1]) + s[1:]
}

// Millis is a millisecond count as a duration, to a tenth of a second.
func Millis(v int64) time.Duration {
	return (time.Duration(v) * time.Millisecond).Round(100 * time.Millisecond)
}

// mdCell keeps a table cell on one line and its pipes literal.
func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", `\|`)
}
