package reports

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

// HTMLFile is the page Write renders from a run's history.
const HTMLFile = "report.html"

//go:embed html.tmpl
var htmlTemplate string

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"seconds": func(ms int64) string { return fmtSeconds(ms) },
}).Parse(htmlTemplate))

// Layout of the timeline (SVG user units).
const (
	plotLeft   = 120.0
	plotWidth  = 1000.0
	rowHeight  = 14.0
	rowGap     = 2.0
	laneGap    = 10.0
	axisHeight = 24.0
	chartH     = 90.0
)

// HTML renders report.html: one self-contained page (inline SVG and CSS, no
// network, no script) that shows the run's history to a person, as
// porcupine's history.html does: a lane per node over Talos time (API mode
// and stage, the etcd service, membership and health), fault windows shaded
// across the lanes they hit, the orchestrator's calls as markers coloured by
// result, a chart of voters and learners, the checks, and the diagnoses
// linked to the history entries that are their evidence. A report without a
// history (schema v1) gets the summary only.
func HTML(r *result.Result) ([]byte, error) {
	v := newView(clean(r))

	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("reports: render %s: %w", HTMLFile, err)
	}

	return buf.Bytes(), nil
}

type view struct {
	R         *result.Result
	Verdict   string
	Duration  string
	HasPlot   bool
	Width     float64
	Height    float64
	PlotRight float64
	Ticks     []tick
	Lanes     []lane
	Bands     []band
	Stalls    []band
	Markers   []marker
	Chart     chartView
	Diagnoses []diagView
	// Unfired are the faults of a pass that never struck (Unfired).
	Unfired []string
	Entries []entryView
	Legend  []legendItem
}

type tick struct {
	X     float64
	Label string
}

type lane struct {
	Node, Role, Address string
	Y                   float64
	Rows                []row
}

type row struct {
	Label    string
	Y        float64
	Segments []segment
}

type segment struct {
	X, W  float64
	Class string
	Title string
}

type band struct {
	X, Y, W, H float64
	Name       string
	Title      string
	Failed     bool
}

type marker struct {
	X, Y   float64
	Class  string
	Title  string
	Anchor string
	Shape  string // "call", "trigger" or "boot"
}

type chartView struct {
	Y        float64
	Max      int
	Voters   string // polyline points
	Learners string
	Labels   []tick
}

type diagView struct {
	result.Diagnosis
	Anchor string
	Talos  string
}

type entryView struct {
	ID     string
	Talos  string
	Wall   string
	Node   string
	Kind   string
	Class  string
	Text   string
	Target bool
}

type legendItem struct {
	Class, Label string
}

// nodeState is what a lane shows of a node at one moment.
type nodeState struct {
	api, apiTitle   string
	etcd, etcdTitle string
	member          string
	kube, kubeTitle string
}

func newView(r *result.Result) *view {
	v := &view{R: r, Verdict: strings.ToUpper(orDash(r.Verdict)), Duration: bothTimes(r.DurationMs, r.TimeScale)}
	if r.Verdict == result.Pass {
		v.Unfired = Unfired(r)
	}

	h := r.History
	if h == nil || len(h.Entries) == 0 {
		return v
	}

	v.HasPlot = true
	end := max(h.Entries[len(h.Entries)-1].TalosMs, 1)
	x := func(talosMs int64) float64 { return plotLeft + plotWidth*float64(talosMs)/float64(end) }

	v.PlotRight = plotLeft + plotWidth
	v.Width = v.PlotRight + 20
	v.Ticks = ticks(end, x)
	v.Legend = legend()

	// Lanes: three rows per node, a fourth for the Kubernetes API server in
	// a run with Kubernetes.
	labels := []string{"API", "etcd", "member"}
	if hasKubernetes(h) {
		labels = append(labels, "k8s")
	}

	laneY := map[string]float64{}
	y := axisHeight

	for _, n := range h.Nodes {
		l := lane{Node: n.Name, Role: string(n.Role), Address: n.Address, Y: y}
		for i, label := range labels {
			l.Rows = append(l.Rows, row{Label: label, Y: y + float64(i)*(rowHeight+rowGap)})
		}

		laneY[n.Name] = y
		v.Lanes = append(v.Lanes, l)
		y += float64(len(labels))*(rowHeight+rowGap) + laneGap
	}

	lanesEnd := y
	idx := map[string]int{}

	for i, n := range h.Nodes {
		idx[n.Name] = i
	}

	// Segments from the walk: a new segment whenever what a row shows changes.
	cur := make([]nodeState, len(h.Nodes))
	since := make([][4]int64, len(h.Nodes))
	started := make([]bool, len(h.Nodes))

	flush := func(i int, r int, until int64, class, title string) {
		if !started[i] || class == "" || until <= since[i][r] || r >= len(v.Lanes[i].Rows) {
			return
		}

		v.Lanes[i].Rows[r].Segments = append(v.Lanes[i].Rows[r].Segments, segment{
			X: x(since[i][r]), W: math.Max(x(until)-x(since[i][r]), 0.5), Class: class, Title: title,
		})
	}

	var voters, learners []string

	maxMembers := 0
	lastV, lastL := -1, -1

	h.Walk(func(e history.Entry, obs *history.Observation) {
		if e.Observed == nil {
			return
		}

		main := obs.Main()

		for i, n := range h.Nodes {
			no := obs.Nodes[n.Name]
			if no == nil {
				continue
			}

			s := stateOf(no, main, n)
			s.kube, s.kubeTitle = kubeStateOf(no, obs)
			old := cur[i]

			if !started[i] {
				started[i] = true
				since[i] = [4]int64{e.TalosMs, e.TalosMs, e.TalosMs, e.TalosMs}
				cur[i] = s

				continue
			}

			if s.api != old.api || s.apiTitle != old.apiTitle {
				flush(i, 0, e.TalosMs, old.api, old.apiTitle)
				since[i][0] = e.TalosMs
			}

			if s.etcd != old.etcd || s.etcdTitle != old.etcdTitle {
				flush(i, 1, e.TalosMs, old.etcd, old.etcdTitle)
				since[i][1] = e.TalosMs
			}

			if s.member != old.member {
				flush(i, 2, e.TalosMs, old.member, memberTitle(old.member))
				since[i][2] = e.TalosMs
			}

			if s.kube != old.kube || s.kubeTitle != old.kubeTitle {
				flush(i, 3, e.TalosMs, old.kube, old.kubeTitle)
				since[i][3] = e.TalosMs
			}

			cur[i] = s
		}

		nv, nl := main.Voters(), main.Learners()
		maxMembers = max(maxMembers, nv+nl)

		if nv != lastV || nl != lastL {
			voters = appendStep(voters, x(e.TalosMs), lastV, nv)
			learners = appendStep(learners, x(e.TalosMs), lastL, nl)
			lastV, lastL = nv, nl
		}
	})

	for i := range h.Nodes {
		flush(i, 0, end, cur[i].api, cur[i].apiTitle)
		flush(i, 1, end, cur[i].etcd, cur[i].etcdTitle)
		flush(i, 2, end, cur[i].member, memberTitle(cur[i].member))
		flush(i, 3, end, cur[i].kube, cur[i].kubeTitle)
	}

	// The chart of voters and learners, under the lanes.
	v.Chart = chartView{Y: lanesEnd + 10, Max: max(maxMembers, 1)}
	scaleY := func(n int) float64 { return v.Chart.Y + chartH - chartH*float64(n)/float64(v.Chart.Max) }
	v.Chart.Voters = points(append(voters, fmt.Sprintf("%.1f,%d", x(end), lastV)), scaleY)
	v.Chart.Learners = points(append(learners, fmt.Sprintf("%.1f,%d", x(end), lastL)), scaleY)

	for n := 0; n <= v.Chart.Max; n++ {
		v.Chart.Labels = append(v.Chart.Labels, tick{X: scaleY(n), Label: fmt.Sprint(n)})
	}

	v.Height = v.Chart.Y + chartH + 20

	// Entries, fault windows and markers.
	open := map[string]history.Entry{}
	boots := map[string]history.Entry{} // each node's last look with a boot ID

	for i, e := range h.Entries {
		id := fmt.Sprintf("e%d", i)

		if ev, ok := entryOf(e, id); ok {
			v.Entries = append(v.Entries, ev)
		}

		// A node back with another boot ID booted again since the look
		// before, though it may never have been seen down: a row and a mark.
		if o := e.Observed; o != nil && o.BootID != "" {
			if last, ok := boots[o.Name]; ok && last.Observed.BootID != o.BootID {
				text := fmt.Sprintf("seen with a new boot ID: it booted again since %s, where the one before was recorded (seen down or not)", talosTime(last.TalosMs))
				v.Entries = append(v.Entries, entryView{ID: id, Talos: talosTime(e.TalosMs), Wall: fmtSeconds(e.WallMs), Node: o.Name, Kind: "boot", Class: "boot", Text: text})

				if ly, ok := laneY[o.Name]; ok {
					v.Markers = append(v.Markers, marker{X: x(e.TalosMs), Y: ly + rowHeight/2, Class: "boot", Shape: "boot",
						Title: fmt.Sprintf("%s: %s %s", talosTime(e.TalosMs), o.Name, text), Anchor: id})
				}
			}

			boots[o.Name] = e
		}

		switch {
		case e.Fault != nil && e.Fault.Phase == history.FaultStarted:
			open[e.Fault.Name] = e
		case e.Fault != nil && e.Fault.Phase == history.FaultStopped:
			if s, ok := open[e.Fault.Name]; ok {
				v.Bands = append(v.Bands, faultBand(s, e.TalosMs, x, laneY, lanesEnd))
				delete(open, e.Fault.Name)
			}
		case e.Call != nil:
			if ly, ok := laneY[e.Node]; ok {
				v.Markers = append(v.Markers, marker{X: x(e.TalosMs), Y: ly + rowHeight/2, Class: callClass(*e.Call), Shape: "call",
					Title: fmt.Sprintf("%s: %s (%s): %s %s", talosTime(e.TalosMs), e.Call.RPC, e.Call.Client, e.Call.Code, e.Call.Message), Anchor: id})
			}
		case e.Stall != nil:
			v.Stalls = append(v.Stalls, stallBand(e, clock.New(h.Scale), x, lanesEnd))
		case e.Trigger != nil:
			if ly, ok := laneY[e.Node]; ok {
				v.Markers = append(v.Markers, marker{X: x(e.TalosMs), Y: ly - 3, Class: "trigger", Shape: "trigger",
					Title: fmt.Sprintf("%s: trigger of %s: %s is %s", talosTime(e.TalosMs), e.Trigger.Fault, e.Node, e.Trigger.State), Anchor: id})
			}
		}
	}

	// Faults still active at the end are shaded to it.
	names := make([]string, 0, len(open))
	for name := range open {
		names = append(names, name)
	}

	sort.Strings(names)

	for _, name := range names {
		v.Bands = append(v.Bands, faultBand(open[name], end, x, laneY, lanesEnd))
	}

	v.Diagnoses = diagnoses(r, h, v.Entries)

	return v
}

func stateOf(no *history.NodeObservation, main history.Cluster, n history.Node) nodeState {
	s := nodeState{}

	switch {
	case no.Mode == history.ModeConfigured && no.Stage != "":
		s.api = "api-" + strings.ReplaceAll(no.Stage, " ", "-")
		s.apiTitle = "configured, stage " + no.Stage
		if no.Version != "" {
			s.apiTitle += ", Talos " + no.Version
		}
	case no.Mode == history.ModeMaintenance:
		s.api, s.apiTitle = "api-maintenance", "maintenance mode"
	default:
		s.api = "api-" + no.Mode
		s.apiTitle = no.Mode
		if no.APIError != "" {
			s.apiTitle += ": " + no.APIError
		}
	}

	if e := no.Etcd; e != nil {
		s.etcd = "etcd-" + strings.ToLower(e.State)
		if e.State == "Running" && !e.HealthUnknown {
			s.etcd += map[bool]string{true: "-healthy", false: "-unhealthy"}[e.Healthy]
		}

		s.etcdTitle = e.State + ": " + e.Message
		if e.HealthMessage != "" {
			s.etcdTitle += " (health: " + e.HealthMessage + ")"
		}
	}

	if n.Role == target.ControlPlane {
		if m, ok := main.MemberOf(no); ok {
			switch {
			case m.IsLearner && m.Hostname == "":
				s.member = "member-unstarted"
			case m.IsLearner:
				s.member = "member-learner"
			default:
				s.member = "member-voter"
			}
		}
	}

	return s
}

// hasKubernetes reports whether any observation saw an API server.
func hasKubernetes(h *history.History) bool {
	for _, e := range h.Entries {
		if e.Observed != nil && e.Observed.APIServer != nil {
			return true
		}
	}

	return false
}

// kubeStateOf is a node's Kubernetes lane: a control plane's API server (in
// the kubernetes endpoints, ready but not (yet) in them, or not ready), a
// worker's Node (Ready or not); the title says the Node's state as well.
func kubeStateOf(no *history.NodeObservation, obs *history.Observation) (class, title string) {
	node := ""
	if nodes, ok := obs.KubernetesNodes(); ok {
		node = "; Node " + judge.KubeNodeState(nodes, no)
	}

	api := no.APIServer
	if api == nil {
		switch {
		case node == "":
			return "", ""
		case strings.HasSuffix(node, " Ready"):
			return "kube-node-ready", strings.TrimPrefix(node, "; ")
		}

		return "kube-node-not-ready", strings.TrimPrefix(node, "; ")
	}

	if !api.Ready {
		return "kube-not-ready", "API server not ready: " + api.Error + node
	}

	if eps, ok := obs.KubernetesEndpoints(); ok && slices.Contains(eps, no.Address) {
		return "kube-in-service", "API server ready, in the kubernetes endpoints" + node
	}

	return "kube-ready", "API server ready, not in the kubernetes endpoints" + node
}

func memberTitle(class string) string {
	return map[string]string{
		"member-unstarted": "learner, not started", "member-learner": "learner", "member-voter": "voting member",
	}[class]
}

func callClass(c history.Call) string {
	switch {
	case c.OK():
		return "call-ok"
	case c.Failure.MayHaveActed():
		return "call-noanswer"
	}

	return "call-failed"
}

func faultBand(start history.Entry, until int64, x func(int64) float64, laneY map[string]float64, lanesEnd float64) band {
	f := start.Fault
	b := band{X: x(start.TalosMs), W: math.Max(x(until)-x(start.TalosMs), 1), Name: f.Name,
		Title: fmt.Sprintf("%s (%s) on %s, %s → %s", f.Name, f.Kind, strings.Join(f.Nodes, ", "), talosTime(start.TalosMs), talosTime(until))}

	top, bottom := math.Inf(1), math.Inf(-1)

	for _, n := range f.Nodes {
		if y, ok := laneY[n]; ok {
			top, bottom = math.Min(top, y), math.Max(bottom, y+3*(rowHeight+rowGap))
		}
	}

	if math.IsInf(top, 1) {
		top, bottom = axisHeight, lanesEnd-laneGap
	}

	b.Y, b.H = top-2, bottom-top+2

	return b
}

// stallBand shades, across every lane, a time talchaos's own process did
// not run: what the lanes show then is the host's.
func stallBand(e history.Entry, clk clock.Clock, x func(int64) float64, lanesEnd float64) band {
	from := e.TalosMs - clk.TalosMs(e.Stall.DurationMs)

	return band{X: x(from), W: math.Max(x(e.TalosMs)-x(from), 1), Y: axisHeight - 2, H: lanesEnd - laneGap - axisHeight + 2, Name: "host stalled",
		Title: fmt.Sprintf("talchaos's process did not run for %s of wall time, %s → %s: the host stood still", fmtSeconds(e.Stall.DurationMs), talosTime(from), talosTime(e.TalosMs))}
}

func appendStep(pts []string, x float64, prev, cur int) []string {
	if prev >= 0 {
		pts = append(pts, fmt.Sprintf("%.1f,%d", x, prev))
	}

	return append(pts, fmt.Sprintf("%.1f,%d", x, cur))
}

// points turns "x,count" pairs into SVG points with y for count.
func points(pairs []string, y func(int) float64) string {
	out := make([]string, 0, len(pairs))

	for _, p := range pairs {
		var (
			x float64
			n int
		)

		if _, err := fmt.Sscanf(p, "%f,%d", &x, &n); err == nil && n >= 0 {
			out = append(out, fmt.Sprintf("%.1f,%.1f", x, y(n)))
		}
	}

	return strings.Join(out, " ")
}

func ticks(end int64, x func(int64) float64) []tick {
	steps := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
		5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}
	// Past the largest step, whole hours: still at most about 12 ticks
	// however long the history (a report read back may span days).
	stepMs := max((end/12+time.Hour.Milliseconds()-1)/time.Hour.Milliseconds(), 1) * time.Hour.Milliseconds()

	for _, s := range steps {
		if end/s.Milliseconds() <= 12 {
			stepMs = s.Milliseconds()

			break
		}
	}

	var out []tick
	for t := int64(0); t >= 0 && t <= end; t += stepMs {
		out = append(out, tick{X: x(t), Label: talosTime(t)})
	}

	return out
}

func talosTime(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

func legend() []legendItem {
	return []legendItem{
		{"api-maintenance", "maintenance"}, {"api-booting", "booting"}, {"api-running", "running"},
		{"api-down", "down"}, {"api-rebooting", "rebooting / resetting"},
		{"etcd-preparing", "etcd preparing / waiting"}, {"etcd-running-healthy", "etcd healthy"},
		{"etcd-running-unhealthy", "etcd unhealthy"}, {"etcd-failed", "etcd failed / stopped"},
		{"member-learner", "learner"}, {"member-unstarted", "learner, not started"}, {"member-voter", "voter"},
		{"kube-not-ready", "API server not ready"}, {"kube-ready", "API server ready"}, {"kube-in-service", "in the endpoints"},
		{"kube-node-not-ready", "Node NotReady"}, {"kube-node-ready", "Node Ready"},
		{"call-ok", "call ok"}, {"call-failed", "call refused"}, {"call-noanswer", "call unanswered"}, {"fault", "fault window"}, {"stall", "host stalled (talchaos not run)"},
		{"boot", "booted again (new boot ID)"},
	}
}

// entryOf is an entry as a row of the history table (observations are in
// the lanes, not in the table).
func entryOf(e history.Entry, id string) (entryView, bool) {
	ev := entryView{ID: id, Talos: talosTime(e.TalosMs), Wall: fmtSeconds(e.WallMs), Node: e.Node}

	switch {
	case e.Call != nil:
		c := e.Call
		ev.Kind, ev.Class = "call", callClass(*c)
		ev.Text = fmt.Sprintf("%s (%s, %d ms): %s", c.RPC, c.Client, c.DurationMs, c.Code)

		if c.Message != "" {
			ev.Text += ": " + c.Message
		}

		if c.Failure != "" {
			ev.Text += " [" + string(c.Failure) + "]"
		}
	case e.Fault != nil:
		f := e.Fault
		ev.Kind, ev.Class = "fault "+f.Phase, "fault"
		ev.Text = fmt.Sprintf("%s (%s) on %s", f.Name, f.Kind, strings.Join(f.Nodes, ", "))

		if f.Error != "" {
			ev.Text += ": " + f.Error
		}
	case e.Trigger != nil:
		t := e.Trigger
		ev.Kind, ev.Class = "trigger", "trigger"
		ev.Text = fmt.Sprintf("%s: %s is %s", t.Fault, e.Node, t.State)

		if t.Heal {
			ev.Text += " (heals it)"
		}
	case e.Log != nil:
		ev.Kind, ev.Class, ev.Text = e.Log.Source, "log", e.Log.Text
	case e.Stall != nil:
		ev.Kind, ev.Class = "stall", "stall"
		ev.Text = fmt.Sprintf("talchaos's process did not run for %s of wall time until here: the host stood still (what was seen then is the host's, not the cluster's)", fmtSeconds(e.Stall.DurationMs))
	case e.Step != "":
		ev.Kind, ev.Class, ev.Text = "step", "step", e.Step
	default:
		return ev, false
	}

	return ev, true
}

// diagnoses link each diagnosis to the history entry its evidence came from:
// the node's entry at the diagnosis's moment, or the latest before it.
func diagnoses(r *result.Result, h *history.History, entries []entryView) []diagView {
	out := make([]diagView, 0, len(r.Diagnoses))

	for _, d := range r.Diagnoses {
		dv := diagView{Diagnosis: d, Talos: talosTime(clock.New(h.Scale).TalosMs(d.TMs))}
		best := -1

		for i, e := range h.Entries {
			if e.Node != d.Node || e.WallMs > d.TMs || (e.Call == nil && e.Log == nil && e.Fault == nil) {
				continue
			}

			best = i
		}

		if best >= 0 {
			dv.Anchor = fmt.Sprintf("e%d", best)

			for i := range entries {
				if entries[i].ID == dv.Anchor {
					entries[i].Target = true
				}
			}
		}

		out = append(out, dv)
	}

	return out
}
