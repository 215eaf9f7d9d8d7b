package judge

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// Exact etcd texts (TALOS-FIDELITY.md §2) the rules look for.
const (
	errTooManyLearners = "etcdserver: too many learner members in cluster"
	errLearnerNotReady = "etcdserver: can only promote a learner member which is in sync with leader"
	errPeerURLExists   = "etcdserver: Peer URLs already exists"
	errLearnerRPC      = "etcdserver: rpc not supported for learner"
)

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// learner is what is known of one named learner member: whether Talos gave up
// promoting it, and how long its promote loop has been running.
type learner struct {
	member history.Member
	// node is the examined node that holds the member (nil: none of them).
	node *history.NodeObservation
	name string // node name, or the member's hostname when no node holds it

	failed    LogLine // "failed promoting member" in its machined log
	hasFailed bool

	// age is how long (wall-clock) the member has been a learner or its etcd
	// Running, whichever is known and longer; known reports whether either is.
	age   time.Duration
	known bool
	// started is when its etcd service reached Running (node clock; zero: unknown).
	started time.Time
	since   time.Duration // first seen a learner (run offset), when seen
	seen    bool
	// joined reports whether its machined log shows the join of this boot, and
	// logged whether there is a log at all.
	joined, logged bool
}

// learners lists the named learners of the main cluster (an unnamed one was
// never started: staleLearner).
func (ev *Evidence) learners() []learner {
	var out []learner

	for _, m := range ev.Final.Main().Members {
		if !m.IsLearner || m.Hostname == "" {
			continue
		}

		l := learner{member: m, name: m.Hostname, node: ev.nodeOfMember(m)}
		if l.node != nil {
			l.name = l.node.Name
		}

		l.failed, l.hasFailed = ev.lastLine(l.name, "failed promoting member")
		l.logged = len(ev.Logs(l.name)) > 0
		_, l.joined = ev.lastLine(l.name, joinNag)

		if l.since, l.seen = ev.LearnerSince(l.name); l.seen {
			l.age, l.known = ev.Now-l.since, true
		}

		if l.node != nil && l.node.Etcd != nil && !l.node.Etcd.Started.IsZero() && !ev.Final.Wall.IsZero() {
			l.started = l.node.Etcd.Started
			l.age, l.known = max(l.age, ev.Final.Wall.Sub(l.started), 0), true
		}

		out = append(out, l)
	}

	return out
}

// joinNag is what Talos logs when a node's etcd starts its join loop (and every
// 30 s while it waits), TALOS-FIDELITY.md §1.
const joinNag = "etcd is waiting to join the cluster"

// given reports whether Talos will never promote this learner: its promote loop
// said so, or its window has passed.
func (l learner) given(ev *Evidence) bool {
	return l.hasFailed || (l.known && l.age >= ev.PromoteWindow)
}

// runningFor describes how long the learner's promote loop has run, in Talos time.
func (l learner) runningFor(ev *Evidence) string {
	var parts []string

	// A run has a timeline of its own (offsets from its start); the doctor
	// has the nodes' clocks.
	running := ev.Final.Wall.Sub(l.started)

	switch {
	case l.started.IsZero():
	case l.seen:
		parts = append(parts, "etcd service Running since "+ev.span(ev.Now-running))
	default:
		parts = append(parts, fmt.Sprintf("etcd service Running since %s (%s of Talos time before this observation)",
			l.started.UTC().Format(time.RFC3339), ev.Clock.TalosString(running)))
	}

	if l.seen {
		parts = append(parts, fmt.Sprintf("learner since %s", ev.span(l.since)))
	}

	if len(parts) == 0 {
		return "how long it has been a learner is unknown"
	}

	return strings.Join(parts, ", ")
}

// leaderRefusals lists, in time order, the "learner is not ready" refusals in
// any etcd log while node was a learner.
// refusalsUntil is when the leader's refusals stop being about node's learner:
// at its promotion, as its own log says it or as it is first seen, or when
// another node became the learner (etcd's refusal names no member, and
// there is one learner at a time).
func (ev *Evidence) refusalsUntil(node string, since time.Duration) (time.Duration, bool) {
	until, _, ended := ev.StintEnd(node)

	end := func(at time.Duration) {
		if !ended || at < until {
			until, ended = at, true
		}
	}

	if l, ok := ev.firstLineAfter(node, since, history.PromotedLine); ok {
		end(l.At)
	}

	// The history's nodes, not the final look: the promote-refused trigger
	// counts refusals while the run goes on.
	for _, o := range ev.nodes {
		if other, ok := ev.LearnerSince(o.Name); ok && o.Role == target.ControlPlane && o.Name != node && other > since {
			end(other)
		}
	}

	return until, ended
}

// leaderRefusals are the leader's refusals to promote node's learner once
// its etcd had started (the member carries the node's name): refusals of a
// member still starting say nothing of its sync (every join begins so, and a
// slow start under load can last a while; one that never starts is a
// stale-learner).
func (ev *Evidence) leaderRefusals(node string) []LogLine {
	since, ok := ev.refusalsFrom[node]
	if !ok || ev.Snapshot {
		return nil
	}

	started, ok := ev.startedAt[node]
	if !ok {
		return nil
	}

	since = max(since, started)

	until, promoted := ev.refusalsUntil(node, since)

	var out []LogLine

	for _, o := range ev.Final.Ordered() {
		for _, l := range ev.EtcdLogs(o.Name) {
			if !strings.Contains(l.Text, history.RefusedPromotion) || l.At < since || (promoted && l.At > until) {
				continue
			}

			out = append(out, LogLine{At: l.At, Text: o.Name + " etcd: " + etcdSummary(l.Text)})
		}
	}

	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })

	return out
}

// etcdSummary turns an etcd JSON log line into "msg (key value, ...)".
func etcdSummary(line string) string {
	var entry map[string]any
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		return line
	}

	msg, _ := entry["msg"].(string) //nolint:errcheck

	var extra []string

	for k, v := range entry {
		switch k {
		case "level", "ts", "msg", "caller", "stacktrace", "logger":
			continue
		}

		extra = append(extra, fmt.Sprintf("%s %v", k, v))
	}

	sort.Strings(extra)

	if len(extra) == 0 {
		return msg
	}

	return msg + " (" + strings.Join(extra, ", ") + ")"
}

// syncNote describes how far a learner's etcd is behind the leader, from EtcdStatus.
func syncNote(ev *Evidence, node string) string {
	n := ev.Final.Nodes[node]
	if n == nil || n.Status == nil {
		return ""
	}

	var leader *history.EtcdStatus

	for _, o := range ev.Final.Nodes {
		if o.Status != nil && o.Status.MemberID == n.Status.Leader && n.Status.Leader != 0 {
			leader = o.Status
		}
	}

	if leader == nil || leader.RaftIndex == 0 {
		return fmt.Sprintf(" (raft index %d)", n.Status.RaftIndex)
	}

	return fmt.Sprintf(" (raft applied index %d of the leader's %d)", n.Status.AppliedIndex, leader.RaftIndex)
}

// describeCall is a call as evidence: "ApplyConfiguration cp2 (insecure): Unavailable: ...".
func describeCall(c CallAt) string {
	if c.OK() {
		return fmt.Sprintf("%s %s (%s): ok", c.RPC, c.Node, c.Client)
	}

	return fmt.Sprintf("%s %s (%s): rpc error: code = %s desc = %s", c.RPC, c.Node, c.Client, c.Code, c.Message)
}
