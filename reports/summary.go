package reports

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/result"
)

// Summary renders a plain-text (no colour) summary of r for a terminal:
// verdict line, outcome, per-node table, checks, diagnoses, faults, error and,
// last, the replay command. The result ends with a newline.
func Summary(r *result.Result) string {
	if r == nil {
		return "ERROR  (no result)\n"
	}

	r = clean(r)

	var b strings.Builder

	fmt.Fprintf(&b, "%s  %s  target=%s seed=%d talos=%s  %s\n",
		verdictWord(r.Verdict), orDash(r.Scenario), orDash(r.Target), r.Seed, orDash(r.Talos), bothTimes(r.DurationMs, r.TimeScale))

	if meta := metaLine(r); meta != "" {
		b.WriteString(meta + "\n")
	}

	// Sections separated by blank lines; tabwriter aligns each block of
	// tab-separated lines independently (a line without tabs ends a block).
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)

	o := r.Outcome
	kube := ""
	if o.KubernetesEndpoints != nil {
		kube = fmt.Sprintf("  kubernetes endpoints=%d", *o.KubernetesEndpoints)
	}

	if o.NodesReady != nil {
		kube += fmt.Sprintf(" nodes ready=%d", *o.NodesReady)
	}

	if ip := o.SharedIP; ip != nil {
		holder := "none"
		if ip.Holder != "" {
			holder = oneLine(ip.Holder)
		}

		if ip.Error != "" {
			holder += " (not answering there)"
		}

		kube += fmt.Sprintf("  shared IP %s held by %s", oneLine(ip.Address), holder)
	}

	fmt.Fprintf(tw, "\noutcome: %s  voters=%d learners=%d%s  in maintenance: %s\n",
		convergedWord(o.Converged, o.ConvergedFor), o.Voters, o.Learners, kube, listOrNone(o.NodesInMaintenance))

	if len(o.Nodes) > 0 {
		fmt.Fprintf(tw, "\nnodes:\n")

		withNote := false

		for _, n := range o.Nodes {
			if nodeNote(n) != "" {
				withNote = true
			}
		}

		header := "  NODE\tADDRESS\tROLE\tSTAGE\tETCD\tHEALTH"
		if o.KubernetesEndpoints != nil {
			header += "\tK8S"
		}

		if withNote {
			header += "\tNOTE"
		}

		fmt.Fprintln(tw, header)

		for _, n := range o.Nodes {
			line := "  " + strings.Join([]string{cell(n.Name), cell(n.Address), cell(n.Role), cell(stageCell(n)), cell(n.EtcdState), cell(n.EtcdHealth)}, "\t")
			if o.KubernetesEndpoints != nil {
				line += "\t" + cell(kubeCell(n))
			}

			if withNote {
				line += "\t" + oneLine(nodeNote(n))
			}

			fmt.Fprintln(tw, line)
		}
	}

	if len(r.Checks) > 0 {
		failed := len(failedChecks(r))
		if failed == 0 {
			fmt.Fprintf(tw, "\nchecks: all %d passed\n", len(r.Checks))
		} else {
			fmt.Fprintf(tw, "\nchecks: %d of %d failed\n", failed, len(r.Checks))
		}

		for _, c := range r.Checks {
			mark := "✓"
			if !c.Passed {
				mark = "✗"
			}

			fmt.Fprintf(tw, "  %s\t%s\texpected %s\tactual %s\n", mark, cell(c.Name), cell(c.Expected), cell(c.Actual))
		}
	} else {
		fmt.Fprintf(tw, "\nchecks: none\n")
	}

	if len(r.Diagnoses) > 0 {
		fmt.Fprintf(tw, "\ndiagnoses:\n")

		for _, d := range r.Diagnoses {
			fmt.Fprintf(tw, "  %s\t%s\t%s (at %s)\n", cell(d.Code), cell(d.Node), oneLine(d.Message), fmtSeconds(d.TMs))

			if d.Evidence != "" {
				prefix := "evidence: "
				for line := range strings.SplitSeq(trimNL(d.Evidence), "\n") {
					fmt.Fprintf(tw, "  \t\t%s%s\n", prefix, oneLine(line))
					prefix = "          "
				}
			}
		}
	}

	if len(r.Faults) > 0 {
		fmt.Fprintf(tw, "\nfaults:\n")

		withErr := slices.ContainsFunc(r.Faults, func(f result.Fault) bool { return f.Error != "" })

		for _, f := range r.Faults {
			start, end := faultSpan(f)

			line := fmt.Sprintf("  %s\t%s\t%s\t%s\t%s → %s", cell(f.Name), cell(f.Kind), cell(f.Node), cell(f.Trigger), start, end)
			if f.Error != "" {
				line += "\terror: " + oneLine(f.Error)
			} else if withErr {
				line += "\t" // keep the time column a cell so it aligns
			}

			fmt.Fprintln(tw, line)
		}

		// A pass with a fault that never struck says nothing of that fault.
		if unfired := Unfired(r); r.Verdict == result.Pass && len(unfired) > 0 {
			fmt.Fprintf(tw, "  note: %s never struck (its trigger never held): this pass says nothing of it\n", oneLine(strings.Join(unfired, ", ")))
		}
	}

	if r.Error != "" {
		fmt.Fprintf(tw, "\nerror:\n")

		for line := range strings.SplitSeq(trimNL(r.Error), "\n") {
			fmt.Fprintf(tw, "  %s\n", oneLine(line))
		}
	}

	if len(r.Events) > 0 {
		fmt.Fprintf(tw, "\nevents: %d recorded (see %s)\n", len(r.Events), JSONFile)
	}

	fmt.Fprintf(tw, "\nreplay: %s\n", replayCmd(r))

	_ = tw.Flush() // writes to a strings.Builder cannot fail

	// Padding of a line's last cell leaves trailing spaces; drop them.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}

	return strings.Join(lines, "\n")
}

// Markdown renders the summary as markdown (the content of summary.md).
func Markdown(r *result.Result) string {
	if r == nil {
		return "# ERROR: no result\n"
	}

	r = clean(r)

	var b strings.Builder

	fmt.Fprintf(&b, "# %s: %s\n\n", verdictWord(r.Verdict), mdCode(r.Scenario, false))

	fmt.Fprintf(&b, "- **Target:** %s\n", mdCode(r.Target, false))
	fmt.Fprintf(&b, "- **Seed:** %d\n", r.Seed)
	fmt.Fprintf(&b, "- **Talos:** %s\n", mdCode(r.Talos, false))
	fmt.Fprintf(&b, "- **Duration:** %s\n", bothTimes(r.DurationMs, r.TimeScale))

	if r.StartedAt != "" {
		fmt.Fprintf(&b, "- **Started:** %s\n", mdCode(r.StartedAt, false))
	}

	if r.File != "" {
		fmt.Fprintf(&b, "- **Scenario file:** %s\n", mdCode(r.File, false))
	}

	if r.TimeScale != 0 && r.TimeScale != 1 {
		fmt.Fprintf(&b, "- **Time scale:** %s\n", strconv.FormatFloat(r.TimeScale, 'g', -1, 64))
	}

	for _, f := range r.ClockFloors {
		fmt.Fprintf(&b, "- **Clock floor:** %s lasts %s of Talos time here, %s on a real node\n",
			f.What, time.Duration(f.ModelledMs)*time.Millisecond, time.Duration(f.TalosMs)*time.Millisecond)
	}

	if r.Tool.Version != "" {
		fmt.Fprintf(&b, "- **Tool:** %s\n", mdCode(r.Tool.String(), false))
	}

	if len(r.Reproduces) > 0 {
		refs := make([]string, len(r.Reproduces))
		for i, ref := range r.Reproduces {
			refs[i] = mdCode(ref, false)
		}

		fmt.Fprintf(&b, "- **Reproduces:** %s\n", strings.Join(refs, ", "))
	}

	if d := strings.TrimSpace(r.Description); d != "" {
		b.WriteString("\n> " + mdText(d, false) + "\n")
	}

	o := r.Outcome
	b.WriteString("\n## Outcome\n\n")
	fmt.Fprintf(&b, "- **Converged:** %s\n", yesNo(o.Converged)+heldFor(o.ConvergedFor))
	fmt.Fprintf(&b, "- **Voters:** %d, **learners:** %d\n", o.Voters, o.Learners)

	maint := "none"
	if len(o.NodesInMaintenance) > 0 {
		codes := make([]string, len(o.NodesInMaintenance))
		for i, n := range o.NodesInMaintenance {
			codes[i] = mdCode(n, false)
		}

		maint = strings.Join(codes, ", ")
	}

	fmt.Fprintf(&b, "- **Nodes in maintenance:** %s\n", maint)

	if len(o.Nodes) > 0 {
		b.WriteString("\n| Node | Address | Role | Stage | etcd | Health | Note |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")

		for _, n := range o.Nodes {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
				mdCode(n.Name, true), mdCode(n.Address, true), mdText(n.Role, true), mdText(stageCell(n), true),
				mdText(n.EtcdState, true), mdText(n.EtcdHealth, true), mdText(nodeNote(n), true))
		}
	}

	b.WriteString("\n## Checks\n\n")

	if len(r.Checks) == 0 {
		b.WriteString("No checks.\n")
	} else {
		b.WriteString("| | Check | Expected | Actual |\n")
		b.WriteString("|---|---|---|---|\n")

		for _, c := range r.Checks {
			mark := "✓"
			if !c.Passed {
				mark = "✗"
			}

			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mark, mdText(c.Name, true), mdCode(c.Expected, true), mdCode(c.Actual, true))
		}
	}

	if len(r.Diagnoses) > 0 {
		b.WriteString("\n## Diagnoses\n")

		for _, d := range r.Diagnoses {
			fmt.Fprintf(&b, "\n### %s", mdCode(d.Code, false))

			if d.Node != "" {
				fmt.Fprintf(&b, " on %s", mdCode(d.Node, false))
			}

			fmt.Fprintf(&b, " at %s\n\n", fmtSeconds(d.TMs))

			if d.Message != "" {
				fmt.Fprintf(&b, "%s\n", mdText(d.Message, false))
			}

			if d.Evidence != "" {
				b.WriteString("\nEvidence:\n\n")
				b.WriteString(mdFence("text", d.Evidence))
			}
		}
	}

	if len(r.Faults) > 0 {
		b.WriteString("\n## Faults\n\n")
		b.WriteString("| Fault | Kind | Node | Trigger | Start | End | Error |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")

		for _, f := range r.Faults {
			start, end := faultSpan(f)

			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
				mdCode(f.Name, true), mdText(f.Kind, true), mdCode(f.Node, true), mdText(f.Trigger, true),
				start, end, mdText(f.Error, true))
		}
	}

	if r.Error != "" {
		b.WriteString("\n## Error\n\n")
		b.WriteString(mdFence("text", r.Error))
	}

	if len(r.Events) > 0 {
		fmt.Fprintf(&b, "\n%d events recorded; see `%s`.\n", len(r.Events), JSONFile)
	}

	b.WriteString("\n## Replay\n\n")
	b.WriteString(mdFence("sh", replayCmd(r)))

	return b.String()
}

// metaLine is the optional second line of the terminal summary.
func metaLine(r *result.Result) string {
	var parts []string

	if r.File != "" {
		parts = append(parts, "file: "+oneLine(r.File))
	}

	if r.StartedAt != "" {
		parts = append(parts, "started: "+oneLine(r.StartedAt))
	}

	if r.TimeScale != 0 && r.TimeScale != 1 {
		parts = append(parts, "time scale: "+strconv.FormatFloat(r.TimeScale, 'g', -1, 64))
	}

	if r.Tool.Version != "" {
		parts = append(parts, r.Tool.String())
	}

	return strings.Join(parts, "  ")
}

// bothTimes is a wall-clock duration with its Talos time beside it, labelled,
// when they differ: "12.3s wall (12m18s Talos)".
func bothTimes(ms int64, scale float64) string {
	clk := clock.New(scale)
	if clk.Scale() == 1 {
		return fmtDuration(ms)
	}

	return fmt.Sprintf("%s wall (%s Talos)", fmtDuration(ms), fmtDuration(clk.TalosMs(ms)))
}

func replayCmd(r *result.Result) string {
	if r.Replay == "" {
		return "(not recorded)"
	}

	return r.Replay
}

// stageCell is a node's stage, with the Talos version it reported in a run
// with a rolling upgrade.
func stageCell(n result.NodeOutcome) string {
	if n.Version == "" {
		return n.Stage
	}

	return n.Stage + " (" + n.Version + ")"
}

// nodeNote is the extra column of the node table: the Talos API error if the
// node could not be queried, else etcd's status message.
// kubeCell is a node's API server in a run with Kubernetes.
func kubeCell(n result.NodeOutcome) string {
	api := ""

	switch {
	case n.APIServer == "":
	case n.InService:
		api = "in service"
	case n.APIServer == "ready":
		api = "ready, not in service"
	default:
		api = "not ready"
	}

	switch {
	case n.KubeNode == "":
		return api
	case api == "":
		return "Node " + n.KubeNode
	}

	return api + ", Node " + n.KubeNode
}

func nodeNote(n result.NodeOutcome) string {
	if n.APIError != "" {
		return "api: " + n.APIError
	}

	return n.EtcdMessage
}

func convergedWord(ok bool, held string) string {
	if ok {
		return "converged" + heldFor(held)
	}

	if held != "" {
		return "not converged (formed only for the last " + held + " Talos)"
	}

	return "not converged"
}

// heldFor says how long the cluster had been converged at the end of the
// run (Talos time), when it was.
func heldFor(held string) string {
	if held == "" {
		return ""
	}

	return " (for the last " + held + " Talos)"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}

	return "no"
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}

	return oneLine(strings.Join(s, ", "))
}

// fmtDuration renders a run duration: "850ms", "12.34s", "1m23s".
func fmtDuration(ms int64) string {
	d := time.Duration(ms) * time.Millisecond

	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// Unfired are the faults of a run that never started: their triggers
// never held (startMs -1), so no check of the run was made under them.
func Unfired(r *result.Result) []string {
	var out []string

	for _, f := range r.Faults {
		if f.StartMs < 0 {
			out = append(out, f.Name)
		}
	}

	return out
}

// faultSpan is when a fault started and ended, for people: "never" for a
// fault that never started (its trigger never held: startMs -1), "-" for an
// end that never came (still active when the run ended: endMs -1, or 0 in
// reports written before -1 meant never).
func faultSpan(f result.Fault) (start, end string) {
	start, end = "never", "-"
	if f.StartMs >= 0 {
		start = fmtSeconds(f.StartMs)
	}

	if f.EndMs > 0 {
		end = fmtSeconds(f.EndMs)
	}

	return start, end
}

// fmtSeconds renders a millisecond offset in seconds without losing
// precision: "0s", "12s", "12.345s".
func fmtSeconds(ms int64) string {
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + "s"
}

// oneLine flattens s for a single table cell: tabs and line breaks become
// spaces so they cannot break tabwriter alignment, and other control
// characters (such as the ESC of ANSI sequences in captured node logs) become
// U+FFFD so they cannot restyle the terminal.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f':
			return ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '\uFFFD'
		}

		return r
	}, strings.TrimRight(s, "\r\n"))
}

// sanitize is oneLine for multi-line text: it keeps tabs and line breaks and
// replaces other control characters with U+FFFD.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return '\uFFFD'
		}

		return r
	}, s)
}

// cell is oneLine with "-" for empty values, for aligned columns.
func cell(s string) string { return orDash(oneLine(s)) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}

	return s
}

// mdCode renders s as an inline code span (or "-" if empty), choosing a
// backtick fence longer than any backtick run in s. In a table, "|" is
// escaped as GFM requires even inside code spans.
func mdCode(s string, inTable bool) string {
	s = oneLine(s)
	if s == "" {
		return "-"
	}

	fence := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") ||
		(strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ")) {
		s = " " + s + " "
	}

	if inTable {
		s = strings.ReplaceAll(s, "|", `\|`)
	}

	return fence + s + fence
}

// mdText escapes markdown punctuation in free text (or gives "-" if empty
// in a table). Line breaks become <br> in tables and spaces elsewhere.
func mdText(s string, inTable bool) string {
	s = sanitize(strings.TrimRight(s, "\r\n"))
	if s == "" {
		if inTable {
			return "-"
		}

		return ""
	}

	var b strings.Builder

	for i, r := range s {
		switch r {
		case '\\', '`', '*', '_', '[', ']', '<', '>', '#', '|', '!', '~', '&':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				continue
			}

			fallthrough
		case '\n':
			if inTable {
				b.WriteString("<br>")
			} else {
				b.WriteByte(' ')
			}
		case '\t':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}

	return b.String()
}

// mdFence renders s as a fenced code block whose fence is longer than any
// backtick run inside s.
func mdFence(lang, s string) string {
	s = sanitize(s)
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))

	return fence + lang + "\n" + trimNL(s) + "\n" + fence + "\n"
}

func longestRun(s string, c byte) int {
	best, cur := 0, 0

	for i := range len(s) {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}

	return best
}
