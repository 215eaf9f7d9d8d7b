package history

import (
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/harness/target"
)

// Known says which names defined outside this package exist: fault kinds
// and trigger states (harness/chaos). A nil Kind checks no kind.
type Known struct {
	Kind func(string) bool
	// States lists the trigger states; nil checks nothing.
	States []string
}

var (
	modes       = []string{ModeUnknown, ModeDown, ModeMaintenance, ModeConfigured, ModePKIMismatch, ModeCertificateTime}
	failures    = []Failure{FailureNone, FailureRefused, FailureNoConnection, FailureCertificateRequired, FailureUnknownAuthority, FailureCertificateTime, FailureNoAnswer}
	faultPhases = []string{FaultStarted, FaultStopped, FaultFailed}
	logSources  = []string{LogMachined, LogEtcd}
	clients     = []string{ClientInsecure, ClientTalosconfig}
	// otherCode is how grpc-go names a code it has no name for.
	otherCode = regexp.MustCompile(`^Code\([0-9]{1,10}\)$`)
)

// maxOffsetMs bounds an offset or a duration in a history: a run lasts at
// most scenario.MaxDuration of Talos time, so never longer on the wall clock
// (twice that leaves room for the last looks and the teardown).
var maxOffsetMs = 2 * scenario.MaxDuration.Milliseconds()

// Check records in p what makes a history read back (report.json's
// "history", at path) inconsistent, so that nothing is judged from it: a
// time scale out of range, no node or a node listed twice or of no known
// role, entries out of time order or whose Talos time is not their wall time
// × the scale, entries that record nothing or two things at once, that name
// a node not in the history or a mode, client, gRPC code, failure class,
// fault phase, trigger state or log source that does not exist, negative
// durations. known says which fault kinds and trigger states exist
// (harness/chaos knows them).
func (h *History) Check(p *strictjson.Problems, path string, known Known) {
	if h.Start.IsZero() {
		p.Addf(strictjson.Key(path, "start"), "is the zero time: a history records when the run started")
	}

	scaleOK := h.Scale >= 1 && h.Scale <= scenario.MaxTimeScale && !math.IsNaN(h.Scale)
	if !scaleOK {
		p.Addf(strictjson.Key(path, "scale"), "is %v: a time scale is between 1 and %d", h.Scale, scenario.MaxTimeScale)
	}

	nodes := h.checkNodes(p, path)

	entries := strictjson.Key(path, "entries")

	var prev int64

	for i := range h.Entries {
		if p.Full() {
			return
		}

		e := &h.Entries[i]
		ep := strictjson.Index(entries, i)

		switch {
		case e.WallMs < 0:
			p.Addf(strictjson.Key(ep, "wallMs"), "is %d: an offset from the run's start is not negative", e.WallMs)
		case e.WallMs > maxOffsetMs:
			p.Addf(strictjson.Key(ep, "wallMs"), "is %d: more than a run can last (%s)", e.WallMs, time.Duration(maxOffsetMs)*time.Millisecond)
		case e.WallMs < prev:
			p.Addf(strictjson.Key(ep, "wallMs"), "is %d, before the previous entry's %d: entries are in time order", e.WallMs, prev)
		case scaleOK && e.TalosMs != clock.New(h.Scale).TalosMs(e.WallMs):
			p.Addf(strictjson.Key(ep, "talosMs"), "is %d, but wallMs × scale is %d", e.TalosMs, clock.New(h.Scale).TalosMs(e.WallMs))
		}

		prev = max(prev, e.WallMs)

		e.check(p, ep, nodes, known)
	}
}

// checkNodes checks the node list and returns the nodes by name.
func (h *History) checkNodes(p *strictjson.Problems, path string) map[string]Node {
	list := strictjson.Key(path, "nodes")
	if len(h.Nodes) == 0 {
		p.Addf(list, "is empty: a history has the nodes of its run")
	}

	nodes := make(map[string]Node, len(h.Nodes))
	names := strictjson.Names{What: "node", List: "nodes", Twice: "listed twice"}

	for i, n := range h.Nodes {
		np := strictjson.Index(list, i)

		if names.Check(p, strictjson.Key(np, "name"), i, n.Name) {
			nodes[n.Name] = n
		}

		if n.Role != target.ControlPlane && n.Role != target.Worker {
			p.Addf(strictjson.Key(np, "role"), "is %s: want %s or %s", strictjson.Quote(string(n.Role)), target.ControlPlane, target.Worker)
		}

		if n.Address == "" {
			p.Addf(strictjson.Key(np, "address"), "is empty")
		}
	}

	return nodes
}

// check checks one entry at path ep.
func (e *Entry) check(p *strictjson.Problems, ep string, nodes map[string]Node, names Known) {
	var what []string

	for _, k := range []struct {
		name string
		set  bool
	}{
		{"observed", e.Observed != nil}, {"call", e.Call != nil}, {"fault", e.Fault != nil},
		{"trigger", e.Trigger != nil}, {"log", e.Log != nil}, {"stall", e.Stall != nil}, {"step", e.Step != ""},
	} {
		if k.set {
			what = append(what, k.name)
		}
	}

	switch len(what) {
	case 0:
		p.Addf(ep, "records nothing: an entry has one of observed, call, fault, trigger, log, stall or step")

		return
	case 1:
	default:
		p.Addf(ep, "records %s at once: an entry has exactly one", strings.Join(what, " and "))

		return
	}

	if e.Final && e.Observed == nil {
		p.Addf(strictjson.Key(ep, "final"), "is set on an entry that is not an observation")
	}

	node, known := nodes[e.Node]

	switch {
	case e.Node == "" && e.Fault == nil && e.Step == "" && e.Stall == nil:
		p.Addf(strictjson.Key(ep, "node"), "missing: every %s entry names its node", what[0])
	case e.Node != "" && !known:
		p.Addf(strictjson.Key(ep, "node"), "names node %s, which is not one of the history's nodes", strictjson.Quote(e.Node))
	}

	switch {
	case e.Observed != nil:
		e.Observed.check(p, strictjson.Key(ep, "observed"), e.Node, node, known)
	case e.Call != nil:
		e.Call.check(p, strictjson.Key(ep, "call"))
	case e.Fault != nil:
		e.Fault.check(p, strictjson.Key(ep, "fault"), e.Node, nodes, names.Kind)
	case e.Trigger != nil:
		e.Trigger.check(p, strictjson.Key(ep, "trigger"), names)
	case e.Stall != nil:
		e.Stall.check(p, ep, e)
	case e.Log != nil:
		if !slices.Contains(logSources, e.Log.Source) {
			p.Addf(strictjson.Key(strictjson.Key(ep, "log"), "source"), "is %s: want %s", strictjson.Quote(e.Log.Source), strings.Join(logSources, " or "))
		}
	}
}

// check: a stall lasted some time, and not since before the run began; it
// is of the process, not of a node.
func (s *Stall) check(p *strictjson.Problems, ep string, e *Entry) {
	if e.Node != "" {
		p.Addf(strictjson.Key(ep, "node"), "names node %s: a stall is of talchaos's process, not of a node", strictjson.Quote(e.Node))
	}

	if s.DurationMs <= 0 || s.DurationMs > e.WallMs {
		p.Addf(strictjson.Key(strictjson.Key(ep, "stall"), "durationMs"), "is %d: a stall lasts some time, and not since before the run began (it ended %d ms in)", s.DurationMs, e.WallMs)
	}
}

func (o *NodeObservation) check(p *strictjson.Problems, op, entryNode string, node Node, known bool) {
	if o.Name != entryNode {
		p.Addf(strictjson.Key(op, "name"), "is %s, but the entry is of node %s", strictjson.Quote(o.Name), strictjson.Quote(entryNode))
	}

	if known && (o.Address != node.Address || o.Role != node.Role) {
		p.Addf(op, "shows node %s at %s as %s, but the history's nodes list it at %s as %s",
			strictjson.Quote(o.Name), strictjson.Quote(o.Address), strictjson.Quote(string(o.Role)), strictjson.Quote(node.Address), strictjson.Quote(string(node.Role)))
	}

	if !slices.Contains(modes, o.Mode) {
		p.Addf(strictjson.Key(op, "mode"), "is %s: want one of %s", strictjson.Quote(o.Mode), strings.Join(modes, ", "))
	}

	if _, err := netip.ParseAddr(o.SharedIP); o.SharedIP != "" && err != nil {
		p.Addf(strictjson.Key(op, "sharedIP"), "is %s: not an IP address", strictjson.Quote(o.SharedIP))
	}

	if o.HoldsSharedIP && o.SharedIP == "" {
		p.Addf(strictjson.Key(op, "holdsSharedIP"), "is true, but the node has no sharedIP to hold")
	}

	if o.SharedIPError != "" && !o.HoldsSharedIP {
		p.Addf(strictjson.Key(op, "sharedIPError"), "is set, but the node does not hold the shared IP (only its holder is asked through it)")
	}

	for _, s := range []struct {
		name string
		svc  *Service
	}{{"etcd", o.Etcd}, {"kubelet", o.Kubelet}} {
		if s.svc != nil && s.svc.Restarts < 0 {
			p.Addf(strictjson.Key(strictjson.Key(op, s.name), "restarts"), "is %d: a count is not negative", s.svc.Restarts)
		}
	}

	if pod := o.APIServerPod; pod != nil {
		if pod.Restarts < 0 {
			p.Addf(strictjson.Key(strictjson.Key(op, "apiServerPod"), "restarts"), "is %d: a count is not negative", pod.Restarts)
		}

		if pod.Running && pod.Waiting != "" {
			p.Addf(strictjson.Key(strictjson.Key(op, "apiServerPod"), "waiting"), "is %s, but the pod's container is running", strictjson.Quote(pod.Waiting))
		}

		if pod.Ready && !pod.Running {
			p.Addf(strictjson.Key(strictjson.Key(op, "apiServerPod"), "ready"), "is true, but the pod's container is not running")
		}
	}
}

func (c *Call) check(p *strictjson.Problems, cp string) {
	if c.RPC == "" {
		p.Addf(strictjson.Key(cp, "rpc"), "is empty")
	}

	if !slices.Contains(clients, c.Client) {
		p.Addf(strictjson.Key(cp, "client"), "is %s: want %s", strictjson.Quote(c.Client), strings.Join(clients, " or "))
	}

	if !knownCode(c.Code) {
		p.Addf(strictjson.Key(cp, "code"), "is %s: not a gRPC code", strictjson.Quote(c.Code))
	}

	switch {
	case !slices.Contains(failures, c.Failure):
		p.Addf(strictjson.Key(cp, "failure"), "is %s: want one of %s", strictjson.Quote(string(c.Failure)), failureNames())
	case c.OK() && c.Failure != FailureNone:
		p.Addf(strictjson.Key(cp, "failure"), "is %s, but the call succeeded (code OK)", c.Failure)
	}

	if c.DurationMs < 0 || c.DurationMs > maxOffsetMs {
		p.Addf(strictjson.Key(cp, "durationMs"), "is %d: want 0 to %d", c.DurationMs, maxOffsetMs)
	}
}

func knownCode(name string) bool {
	for c := range codes.Code(17) {
		if c.String() == name {
			return true
		}
	}

	return otherCode.MatchString(name)
}

func failureNames() string {
	out := make([]string, 0, len(failures))
	for _, f := range failures[1:] {
		out = append(out, string(f))
	}

	return `"" (none), ` + strings.Join(out, ", ")
}

func (f *FaultEvent) check(p *strictjson.Problems, fp, entryNode string, nodes map[string]Node, knownKind func(string) bool) {
	if f.Name == "" {
		p.Addf(strictjson.Key(fp, "name"), "is empty")
	}

	switch {
	case f.Kind == "":
		p.Addf(strictjson.Key(fp, "kind"), "is empty")
	case knownKind != nil && !knownKind(f.Kind):
		p.Addf(strictjson.Key(fp, "kind"), "is %s: no such fault kind (talchaos faults)", strictjson.Quote(f.Kind))
	}

	if !slices.Contains(faultPhases, f.Phase) {
		p.Addf(strictjson.Key(fp, "phase"), "is %s: want %s", strictjson.Quote(f.Phase), strings.Join(faultPhases, ", "))
	}

	if f.Error != "" && f.Phase != FaultFailed {
		p.Addf(strictjson.Key(fp, "error"), "is set on phase %s: only a fault that failed (phase %s) has one", strictjson.Quote(f.Phase), FaultFailed)
	}

	for i, n := range f.Nodes {
		if _, ok := nodes[n]; !ok {
			p.Addf(strictjson.Index(strictjson.Key(fp, "nodes"), i), "names node %s, which is not one of the history's nodes", strictjson.Quote(n))
		}
	}

	want := ""
	if len(f.Nodes) == 1 {
		want = f.Nodes[0]
	}

	if entryNode != want {
		p.Addf(fp, "is on nodes [%s] but its entry is of node %s", strings.Join(quoteAll(f.Nodes), ", "), strictjson.Quote(entryNode))
	}
}

func (t *Trigger) check(p *strictjson.Problems, tp string, known Known) {
	if t.Fault == "" {
		p.Addf(strictjson.Key(tp, "fault"), "is empty")
	}

	if known.States != nil && !slices.Contains(known.States, t.State) {
		p.Addf(strictjson.Key(tp, "state"), "is %s: want one of %s", strictjson.Quote(t.State), strings.Join(known.States, ", "))
	}

	if t.Count < 0 {
		p.Addf(strictjson.Key(tp, "count"), "is %d: a count is not negative", t.Count)
	}

	if t.AfterMs < 0 || t.AfterMs > maxOffsetMs {
		p.Addf(strictjson.Key(tp, "afterMs"), "is %d: want 0 to %d (%s)", t.AfterMs, maxOffsetMs, time.Duration(maxOffsetMs)*time.Millisecond)
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strictjson.Quote(s)
	}

	return out
}
