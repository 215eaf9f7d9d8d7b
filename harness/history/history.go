// Package history is the record of a run: typed entries with wall-clock and
// Talos-time offsets, of what the nodes were seen to be (every change of every
// node's state), what the orchestrator called and what came back, which faults
// started and stopped and which triggers fired, and the nodes' log lines. It
// lives in report.json; the judge (harness/judge) derives the outcome, the
// diagnoses and the verdict from it alone, as Jepsen's checkers read a
// history, so a report can be judged again and shown to a person.
package history

import (
	"slices"
	"sync"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/target"
)

// History is the record of one run (or of one look at a live cluster).
type History struct {
	// Start is when the offsets count from, by the local clock: an
	// observation's wall time is Start + its offset (a learner's age is read
	// against its etcd service's start, by the node's clock).
	Start time.Time `json:"start"`
	// Scale is the run's time scale: Talos time is wall time × Scale.
	Scale float64 `json:"scale"`
	// Nodes are the nodes, in order.
	Nodes []Node `json:"nodes"`
	// Entries are in the order they were recorded (wall time, then record order).
	Entries []Entry `json:"entries"`
}

// Node is one node of the run. Hostname and Addresses are as in
// NodeObservation: what its member is named and its peer URLs may name.
type Node struct {
	Name      string      `json:"name"`
	Role      target.Role `json:"role"`
	Address   string      `json:"address"`
	Hostname  string      `json:"hostname,omitempty"`
	Addresses []string    `json:"addresses,omitempty"`
}

// NodeOf is the run's node n.
func NodeOf(n target.Node) Node {
	return Node{Name: n.Name, Role: n.Role, Address: n.Address, Hostname: n.Hostname, Addresses: n.Addresses}
}

// Declared is an observation of the nodes as the run declares them, nothing
// looked at yet: for mapping members to nodes before a node was seen.
func Declared(nodes []Node) *Observation {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}

	o := NewObservation(0, names)
	for _, n := range nodes {
		o.Nodes[n.Name] = n.unobserved()
	}

	return o
}

// unobserved is the node as declared, not looked at.
func (n Node) unobserved() *NodeObservation {
	return &NodeObservation{Name: n.Name, Address: n.Address, Hostname: n.Hostname, Addresses: n.Addresses, Role: n.Role, Mode: ModeUnknown}
}

// Entry is one recorded thing. Exactly one of its pointers is set.
type Entry struct {
	// WallMs is the offset from the run's start; TalosMs the same in Talos time.
	WallMs  int64  `json:"wallMs"`
	TalosMs int64  `json:"talosMs"`
	Node    string `json:"node,omitempty"`

	// Observed is the node's state as a poll saw it; recorded when it changed
	// (it holds until the node's next Observed entry). Final marks the last
	// look at every node when the run ended.
	Observed *NodeObservation `json:"observed,omitempty"`
	Final    bool             `json:"final,omitempty"`

	Call    *Call       `json:"call,omitempty"`
	Fault   *FaultEvent `json:"fault,omitempty"`
	Trigger *Trigger    `json:"trigger,omitempty"`
	Log     *Log        `json:"log,omitempty"`
	// Stall is a time the run's own process did not run, ending at the
	// entry's offset: what it saw then is the host's, not the cluster's.
	Stall *Stall `json:"stall,omitempty"`
	// Step is an orchestrator's own account of what it does next (not judged).
	Step string `json:"step,omitempty"`
}

// At is the entry's wall-clock offset.
func (e Entry) At() time.Duration { return time.Duration(e.WallMs) * time.Millisecond }

// Call is one Talos API call an orchestrator made, and what came back.
type Call struct {
	RPC string `json:"rpc"`
	// Client is "insecure" (the maintenance client) or "talosconfig".
	Client string `json:"client"`
	// Code is the gRPC code name ("OK" when it succeeded).
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	// Failure classifies a failed call (Classify): what the error says about
	// whether the node got the call and acted on it.
	Failure    Failure `json:"failure,omitempty"`
	DurationMs int64   `json:"durationMs"`
}

// OK reports whether the call succeeded.
func (c Call) OK() bool { return c.Code == "OK" }

// Client kinds.
const (
	ClientInsecure    = "insecure"
	ClientTalosconfig = "talosconfig"
)

// Fault phases.
const (
	FaultStarted = "start"
	FaultStopped = "stop"
	FaultFailed  = "error"
)

// FaultEvent is a fault starting, stopping, or failing to.
type FaultEvent struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	Phase string   `json:"phase"`
	Nodes []string `json:"nodes,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Trigger is a fault's trigger firing: its node was seen in its state.
type Trigger struct {
	Fault string `json:"fault"`
	State string `json:"state"`
	Count int    `json:"count,omitempty"`
	// Heal is set for an until trigger (the fault heals after AfterMs).
	Heal    bool  `json:"heal,omitempty"`
	AfterMs int64 `json:"afterMs,omitempty"`
}

// Stall is a time talchaos's process was not scheduled (a paused VM, a
// starved or swapping host, a stopped process): neither its orchestrator nor
// its observer ran, nor, on the sim, the nodes; on containers the whole
// machine may have stood still with it. It ended at its entry's offset.
type Stall struct {
	DurationMs int64 `json:"durationMs"`
}

// VoidingStall is the shortest stall of talchaos's own process, in Talos
// time, across which a failed expectation is not the cluster's (the judge
// voids the run): a minute, half the shortest window the judge and the
// resilient orchestrator count with (a learner older than two minutes is
// stale). The run tells every stall of a Talos minute at time scales up to
// 60, and above that every one of a second of wall time (harness
// stallGapAt). While the process stood still nothing of talchaos ran
// (orchestrator, observer, on the sim the nodes' etcd and timers); on
// containers the whole machine may have stood still with it.
// When it resumed, every deadline and window that the stall spanned had run
// out at once: a learner's promote window, a join's timeout, the
// orchestrator's waits.
const VoidingStall = time.Minute

// VoidingStalls are the stall entries of at least VoidingStall of Talos time,
// in order (none for nil).
func (h *History) VoidingStalls() []Entry {
	if h == nil {
		return nil
	}

	clk := clock.New(h.Scale)

	var out []Entry

	for _, e := range h.Entries {
		if e.Stall != nil && clk.Talos(time.Duration(e.Stall.DurationMs)*time.Millisecond) >= VoidingStall {
			out = append(out, e)
		}
	}

	return out
}

// Log sources.
const (
	LogMachined = "machined"
	LogEtcd     = "etcd"
)

// Log is one line of a node's log, as the Logs API streamed it: every
// machined line; etcd's warnings and errors (Level says which).
type Log struct {
	Source string `json:"source"`
	Level  string `json:"level,omitempty"`
	Text   string `json:"text"`
}

// Recorder builds a history while a run goes on; it is safe for concurrent use.
// A nil Recorder records nothing (an orchestrator run outside a scenario).
type Recorder struct {
	start time.Time
	clock clock.Clock

	mu     sync.Mutex
	h      History
	last   map[string]*NodeObservation // the last recorded state of each node
	lastAt map[string]time.Duration    // and when it was recorded
	scrub  func(string) string
	folds  []*Follower
	// closed: the verdict has been drawn; nothing more is recorded, so the
	// report's history is the one the verdict was drawn from.
	closed bool
}

// Fold is a fold over a history's entries in their order (as porcupine's
// Model.Step): the judge's evidence.
type Fold interface {
	Apply(e Entry)
}

// Follower keeps a fold of what a Recorder has recorded up to date as
// entries are recorded, so that what a run reacts to while it goes on
// (triggers) is what the judge reads from the history afterwards.
type Follower struct {
	r     *Recorder
	start func(header History) Fold
	fold  Fold
	// stale: an entry was recorded before the last one (a poll's answer
	// stamped when the poll started); the fold is made again on the next read.
	stale bool
	// watch is called after each entry is applied (Watch).
	watch []func(Fold, Entry)
}

// NewRecorder starts a history whose offsets count from start.
func NewRecorder(start time.Time, clk clock.Clock, nodes []Node) *Recorder {
	return &Recorder{start: start, clock: clk, h: History{Start: start.UTC(), Scale: clk.Scale(), Nodes: nodes}, last: map[string]*NodeObservation{}, lastAt: map[string]time.Duration{}}
}

// SetScrubber makes every recorded text pass through f (secrets out).
func (r *Recorder) SetScrubber(f func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.scrub = f
}

// Follow keeps a fold of the history: start makes an empty one from the
// history's header (start, scale, nodes), which is then given every entry
// recorded so far and from now on, in the history's order.
func (r *Recorder) Follow(start func(header History) Fold) *Follower {
	f := &Follower{r: r, start: start, stale: true}

	r.mu.Lock()
	r.folds = append(r.folds, f)
	r.mu.Unlock()

	return f
}

// Read calls fn with the fold of every entry recorded so far. The recorder
// waits while fn runs: fn must be quick, and must not record.
func (f *Follower) Read(fn func(Fold)) {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()

	if f.stale {
		header := f.r.h
		header.Entries = nil
		f.fold = f.start(header)

		for _, e := range f.r.h.Entries {
			f.apply(e)
		}

		f.stale = false
	}

	fn(f.fold)
}

// Watch calls fn after each entry is applied to the fold, with the fold as
// that entry leaves it: every state the history shows is seen, however
// briefly it held and however seldom the fold is read. The recorder is
// locked while fn runs: fn must be quick, must not record and must not read
// the follower. When an entry was recorded out of order, the fold is made
// again on the next Read and fn sees every entry again, in the new order:
// what fn does with a state must not depend on seeing it once.
func (f *Follower) Watch(fn func(Fold, Entry)) {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()

	f.watch = append(f.watch, fn)
}

func (f *Follower) apply(e Entry) {
	f.fold.Apply(e)

	for _, fn := range f.watch {
		fn(f.fold, e)
	}
}

// Since is the offset of now from the run's start.
func (r *Recorder) Since() time.Duration { return time.Since(r.start) }

func (r *Recorder) add(at time.Duration, e Entry) {
	e.WallMs = at.Milliseconds()

	r.mu.Lock()
	defer r.mu.Unlock()

	if r.closed {
		return
	}

	e.TalosMs = r.clock.TalosMs(e.WallMs)

	// Entries are kept in time order (wall time, then record order): most
	// arrive last; a poll's answer is stamped when the poll started.
	i := len(r.h.Entries)
	for i > 0 && r.h.Entries[i-1].WallMs > e.WallMs {
		i--
	}

	r.h.Entries = slices.Insert(r.h.Entries, i, e)

	for _, f := range r.folds {
		if i == len(r.h.Entries)-1 && !f.stale {
			f.apply(e)
		} else {
			f.stale = true
		}
	}
}

func (r *Recorder) clean(s string) string {
	r.mu.Lock()
	f := r.scrub
	r.mu.Unlock()

	if f == nil || s == "" {
		return s
	}

	return f(s)
}

// indexSample is how often a node's moving raft indexes are recorded when
// nothing else about it changed.
const indexSample = time.Second

// Observe records a node's state at a poll made at `at`, if it differs from
// the last state recorded for the node, or only its raft indexes moved and
// indexSample has passed (or final is set: the run's last look). It reports
// whether it recorded.
func (r *Recorder) Observe(at time.Duration, n *NodeObservation, final bool) bool {
	if r == nil {
		return false
	}

	c := *n
	c.APIError = r.clean(c.APIError)
	c.MembersErr = r.clean(c.MembersErr)
	c.StatusErr = r.clean(c.StatusErr)

	r.mu.Lock()
	prev := r.last[n.Name]
	changed := prev == nil || !Same(prev, &c) ||
		(at-r.lastAt[n.Name] >= indexSample && c.Status != nil && *c.Status != *prev.Status)

	if changed || final {
		r.last[n.Name] = &c
		r.lastAt[n.Name] = at
	}
	r.mu.Unlock()

	if !changed && !final {
		return false
	}

	r.add(at, Entry{Node: n.Name, Observed: &c, Final: final})

	return true
}

// Call records a call to node that ended now and took d.
func (r *Recorder) Call(node, rpc, client string, d time.Duration, err error) {
	if r == nil {
		return
	}

	code, msg := CodeOf(err)

	r.add(r.Since(), Entry{Node: node, Call: &Call{
		RPC: rpc, Client: client, Code: code, Message: r.clean(msg), Failure: Classify(err), DurationMs: d.Milliseconds(),
	}})
}

// Fault records a fault event on its nodes.
func (r *Recorder) Fault(f FaultEvent) {
	if r == nil {
		return
	}

	f.Error = r.clean(f.Error)

	node := ""
	if len(f.Nodes) == 1 {
		node = f.Nodes[0]
	}

	r.add(r.Since(), Entry{Node: node, Fault: &f})
}

// Trigger records a trigger firing on node.
func (r *Recorder) Trigger(node string, t Trigger) {
	if r == nil {
		return
	}

	r.add(r.Since(), Entry{Node: node, Trigger: &t})
}

// Log records a log line of node received at `at`.
func (r *Recorder) Log(at time.Duration, node string, l Log) {
	if r == nil {
		return
	}

	l.Text = r.clean(l.Text)
	r.add(at, Entry{Node: node, Log: &l})
}

// Step records an orchestrator's step.
func (r *Recorder) Step(node, text string) {
	if r == nil {
		return
	}

	r.add(r.Since(), Entry{Node: node, Step: r.clean(text)})
}

// Stall records that the process was not scheduled for d, until now.
func (r *Recorder) Stall(d time.Duration) {
	if r == nil {
		return
	}

	r.add(r.Since(), Entry{Stall: &Stall{DurationMs: d.Milliseconds()}})
}

// Close ends the history: what is recorded afterwards (a log line still on
// its way when the run draws its verdict) is dropped, and History returns
// the same entries from now on. A nil Recorder has nothing to close.
func (r *Recorder) Close() {
	if r == nil {
		return
	}

	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// History is a copy of what was recorded so far, in time order.
func (r *Recorder) History() History {
	r.mu.Lock()
	h := r.h
	h.Nodes = append([]Node(nil), r.h.Nodes...)
	h.Entries = append([]Entry(nil), r.h.Entries...)
	r.mu.Unlock()

	return h
}
