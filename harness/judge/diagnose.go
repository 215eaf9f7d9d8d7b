package judge

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

// Evidence is what the rules read, derived from a history alone (FromHistory):
// the final look at the nodes, their logs, when each member was a learner and
// was promoted, the orchestrator's calls and the nodes' mode changes.
type Evidence struct {
	Final *history.Observation

	machined, etcd           map[string][]LogLine
	learnerSince, promotedAt map[string]time.Duration
	refusalsFrom             map[string]time.Duration
	// startedAt is when each node's learner was first seen named (its etcd
	// had started).
	startedAt map[string]time.Duration
	// stints are every member's time as a learner, in the order first
	// seen, a node's removed member and its later one apart (a promotion
	// after a removal is of the later member's stint); stintOf finds a
	// member's.
	stints  []stint
	stintOf map[uint64]int

	// The fold's own state (Apply): the nodes, the history's start, the
	// cluster as the entries so far show it, each node's last API mode and
	// whether it was in maintenance since it last left, the offset of the
	// last observation.
	nodes []history.Node
	// declared maps members to nodes not looked at yet (nodeOf).
	declared       *history.Observation
	start          time.Time
	cur            *history.Observation
	mode           map[string]string
	wasMaintenance map[string]bool
	prevAt         time.Duration

	// Calls are the orchestrator's calls, in time order.
	Calls []CallAt
	// Changes are the nodes' API mode changes, in time order.
	Changes []ModeChange
	// EtcdFailed is, per node, the first look at its etcd service Failed;
	// EtcdCrashes every look at it that showed new restarts after its task
	// exited.
	EtcdFailed map[string]ServiceAt
	// SpecWaiting is, per node, since when its etcd service has been
	// waiting for its etcd spec alone, as long as it still is.
	SpecWaiting map[string]time.Duration
	// TimeWaiting is, per node, since when its etcd or kubelet service has
	// been waiting for the time sync, with the last look's service, as long
	// as it still is.
	TimeWaiting map[string]ServiceAt
	EtcdCrashes map[string][]ServiceAt
	restarts    map[string]int // the restart count of the last look, per node
	// APIServerExits are, per control plane, the looks that showed its
	// kube-apiserver static pod restarted again while its etcd member was a
	// voter and its etcd service Running and healthy.
	APIServerExits map[string][]time.Duration
	podRestarts    map[string]int // the API server pod's restart count of the last look, per node
	// FirstVersion is, per node, the first Talos version it reported (runs
	// with a rolling upgrade look at versions).
	FirstVersion map[string]string
	// Reboots are, per node, when it was first seen with another boot ID
	// than before (runs with a rolling upgrade look at boot IDs).
	Reboots map[string][]time.Duration
	bootID  map[string]string // the last boot ID seen, per node
	// SharedIPHeld is, per shared IP, the last look that found a control
	// plane holding it.
	SharedIPHeld map[string]NodeAt
	// LastMember is, per node, its etcd member as the last member list that
	// listed it had it: a member list needs a quorum (etcd's MemberList is
	// linearizable, Talos asks it so), so without one the last looks have
	// none.
	LastMember map[string]history.Member

	// PromoteWindow is the Talos promote window in wall-clock time.
	PromoteWindow time.Duration
	// Now is the offset of the final observation.
	Now time.Duration
	// Clock is the run's time scale (Talos time / wall-clock time).
	Clock clock.Clock
	// Snapshot is set for one look at a live cluster (the doctor): there is
	// no timeline of the run, only the nodes' own clocks.
	Snapshot bool
}

// ServiceAt is a service as a look at the node found it.
type ServiceAt struct {
	history.Service

	At time.Duration
	// New is, for a restart, how many restarts this look showed that the
	// previous one had not.
	New int
}

// LogLine is one line of a node's log, at its offset in the run.
type LogLine struct {
	At   time.Duration
	Text string
}

// CallAt is an orchestrator call to a node, ended at At.
type CallAt struct {
	history.Call

	Node string
	At   time.Duration
}

// ModeChange is a node's API mode changing (history.ModeMaintenance → ...).
// LeftMaintenance marks the change to configured of a node that was in
// maintenance before (possibly through a moment of "down" while its API
// switched to mutual TLS).
type ModeChange struct {
	Node, From, To  string
	APIError        string
	LeftMaintenance bool
	At              time.Duration
}

// Logs is a node's machined log lines.
func (ev *Evidence) Logs(node string) []LogLine { return ev.machined[node] }

// EtcdLogs is the warnings and errors of a node's etcd log.
func (ev *Evidence) EtcdLogs(node string) []LogLine { return ev.etcd[node] }

// LearnerSince reports when the node's member was first seen as a learner.
func (ev *Evidence) LearnerSince(node string) (time.Duration, bool) {
	t, ok := ev.learnerSince[node]

	return t, ok && !ev.Snapshot
}

// PromotedAt reports when the node's member was seen promoted.
func (ev *Evidence) PromotedAt(node string) (time.Duration, bool) {
	t, ok := ev.promotedAt[node]

	return t, ok && !ev.Snapshot
}

// StintEnd reports when the node's first learner stint ended: at its
// member's promotion, or when that member was removed before any; promoted
// says which. A node removed and joined again (a reset) is promoted, if at
// all, as another member, which does not end the first stint a second time.
func (ev *Evidence) StintEnd(node string) (end time.Duration, promoted, ended bool) {
	i := slices.IndexFunc(ev.stints, func(st stint) bool { return st.node == node })
	if ev.Snapshot || i < 0 || !ev.stints[i].ended {
		return 0, false, false
	}

	return ev.stints[i].end, !ev.stints[i].removed, true
}

// talosPromoteWindow is Talos's promote loop budget on every line (TALOS-FIDELITY.md §1).
const talosPromoteWindow = 10 * time.Minute

// firstLineAfter is node's first machined line holding substr at or after at.
func (ev *Evidence) firstLineAfter(node string, at time.Duration, substr string) (LogLine, bool) {
	for _, l := range ev.Logs(node) {
		if l.At >= at && strings.Contains(l.Text, substr) {
			return l, true
		}
	}

	return LogLine{}, false
}

// firstLine finds the node's first log line containing substr.
func (ev *Evidence) firstLine(node, substr string) (LogLine, bool) {
	for _, l := range ev.Logs(node) {
		if strings.Contains(l.Text, substr) {
			return l, true
		}
	}

	return LogLine{}, false
}

// lastLine finds the node's last log line containing substr.
func (ev *Evidence) lastLine(node, substr string) (LogLine, bool) {
	lines := ev.Logs(node)

	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i].Text, substr) {
			return lines[i], true
		}
	}

	return LogLine{}, false
}

// calls lists the calls of an RPC to a node, in time order.
func (ev *Evidence) calls(node, rpc string) []CallAt {
	var out []CallAt

	for _, c := range ev.Calls {
		if c.Node == node && c.RPC == rpc {
			out = append(out, c)
		}
	}

	return out
}

// nodeOfMember finds the examined node that holds an etcd member
// (Observation.NodeOf), nil when none does.
func (ev *Evidence) nodeOfMember(m history.Member) *history.NodeObservation {
	return ev.Final.Nodes[ev.Final.NodeOf(m)]
}

func (ev *Evidence) controlPlanes() []*history.NodeObservation {
	var out []*history.NodeObservation

	for _, n := range ev.Final.Ordered() {
		if n.Role == target.ControlPlane {
			out = append(out, n)
		}
	}

	return out
}

// NodeAt is a node at an offset of the run.
type NodeAt struct {
	Node string
	At   time.Duration
}

func diag(code, node, msg, evidence string, at time.Duration) result.Diagnosis {
	return result.Diagnosis{Code: code, Node: node, Message: msg, Evidence: evidence, TMs: at.Milliseconds()}
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// span is an offset or a duration of the run as people read the report:
// Talos time, with the wall-clock time beside it when they differ
// ("8m24s Talos (8.4s wall)").
func (ev *Evidence) span(d time.Duration) string {
	if ev.Clock.Scale() <= 1 {
		return seconds(d)
	}

	return ev.Clock.TalosString(d) + " Talos (" + seconds(d) + " wall)"
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
