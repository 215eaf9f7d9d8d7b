package reports

import (
	"fmt"
	"html"
	"path/filepath"
	"strings"

	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/reports/stats"
)

// Files a night writes beside the scenarios' hunts (OUT/SCENARIO/).
const (
	LedgerFile       = "ledger.json"
	NightlyIndexFile = "index.html"
)

// WriteNightly writes a night's junit.xml (a test suite per scenario, a
// test case per seed), summary.md (a row per scenario, with its change
// against the baseline when compared) and index.html (every run's
// report.html, at OUT/SCENARIO/REPORT) into dir, beside its ledger: what
// `talchaos nightly` writes, and `talchaos merge` of a night's shards.
func WriteNightly(dir string, hunts []*Hunt, changes []stats.Change, compared bool) error {
	byName := map[string]stats.Change{}
	for _, c := range changes {
		byName[c.Scenario] = c
	}

	junit, err := HuntsJUnit(hunts)
	if err != nil {
		return err
	}

	var md, idx strings.Builder

	md.WriteString("## talchaos nightly\n\n| scenario | passed | rate (95 % interval) | p50 | p95 | outcomes | vs baseline |\n|---|---|---|---|---|---|---|\n")
	idx.WriteString("<!doctype html><meta charset=utf-8><title>talchaos nightly</title>" +
		"<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}.fail{color:#b00}</style>" +
		"<h1>talchaos nightly</h1><table><tr><th>scenario</th><th>rate</th><th>runs</th></tr>\n")

	for _, h := range hunts {
		s := h.Summary

		var outcomes []string
		for _, o := range s.Outcomes {
			outcomes = append(outcomes, fmt.Sprintf("%s ×%d", o.Key(), len(o.Seeds)))
		}

		vs := "-"

		if c, ok := byName[h.Scenario]; ok && compared {
			switch {
			case c.New:
				vs = "new"
			case c.Unjudged:
				vs = fmt.Sprintf("not compared: no judged run (%s before)", PassedOf(c.Before))
			case c.Regression:
				vs = fmt.Sprintf("**regression** %s → %s, p = %.3g", PassedOf(c.Before), PassedOf(s), c.P)
			case c.Improvement:
				vs = fmt.Sprintf("improvement %s → %s, p = %.3g", PassedOf(c.Before), PassedOf(s), c.P)
			default:
				vs = fmt.Sprintf("same (%s before, p = %.3g)", PassedOf(c.Before), c.P)
			}
		}

		// Cells are kept in their table: a merged night's names and codes
		// come from files, not from this process.
		fmt.Fprintf(&md, "| %s | %s | %.2f (%.2f–%.2f) | %s | %s | %s | %s |\n", mdCell(h.Scenario), PassedOf(s), s.Rate, s.Low, s.High,
			Millis(s.P50Ms), Millis(s.P95Ms), mdCell(strings.Join(outcomes, "; ")), vs)

		class := ""
		if s.Passed < s.Judged() {
			class = ` class="fail"`
		}

		fmt.Fprintf(&idx, "<tr%s><td>%s</td><td>%s</td><td>", class, html.EscapeString(h.Scenario), html.EscapeString(PassedOf(s)))

		for _, r := range h.Runs {
			fmt.Fprintf(&idx, `<a href="%s/%s/report.html">%d %s</a> `, html.EscapeString(h.Scenario), html.EscapeString(r.Report), r.Seed, html.EscapeString(r.Verdict))
		}

		idx.WriteString("</td></tr>\n")
	}

	idx.WriteString("</table>\n")

	for _, h := range hunts {
		if h.Summary.Unstruck > 0 {
			note := h.Scenario + ": " + UnstruckNote(h)
			md.WriteString("\n" + mdCell(note) + "\n")
			idx.WriteString("<p>" + html.EscapeString(note) + "</p>\n")
		}
	}

	if void := voidRuns(hunts); void > 0 {
		note := fmt.Sprintf("%d runs void (%s): they say nothing of their scenarios and no rate counts them. %s", void, VoidWhy, voidRunner)
		md.WriteString("\n" + note + "\n")
		idx.WriteString("<p>" + html.EscapeString(note) + "</p>\n")
	}

	for name, data := range map[string][]byte{
		JUnitFile:        junit,
		HuntSummaryFile:  []byte(md.String()),
		NightlyIndexFile: []byte(idx.String()),
	} {
		if err := scratch.WriteFileAtomic(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}

	return nil
}

// PassedOf is a summary's passes over its judged runs, with its void runs
// when it has any: "9/10 (+10 void)".
func PassedOf(s stats.Summary) string {
	if s.Void == 0 {
		return fmt.Sprintf("%d/%d", s.Passed, s.Judged())
	}

	return fmt.Sprintf("%d/%d (+%d void)", s.Passed, s.Judged(), s.Void)
}

func voidRuns(hunts []*Hunt) int {
	n := 0
	for _, h := range hunts {
		n += h.Summary.Void
	}

	return n
}
