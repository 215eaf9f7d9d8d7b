package judge

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

// Exact etcd texts (TALOS-FIDELITY.md §2) the rules look for.
const (
	errTooManyLearners = "etcdserver: too many learner members in cluster"
	errLearnerNotReady = "etcdserver: can only promote a learner member which is in sync with leader"
	errPeerURLExists   = "etcdserver: Peer URLs already exists"
	errLearnerRPC      = "etcdserver: rpc not supported for learner"
)

// blockedLong is how long (Talos time) one learner must have blocked a refused
// join to count: a joiner refused while the previous learner is promoted is
// normal.
const blockedLong = 2 * time.Minute

// tooManyLearners: a control plane was refused because the learner slot was
// taken (talos #5350, field report FR-000): for good when it is still not a member, or for
// long before it finally got in.
func tooManyLearners(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	main := ev.Final.Main()

	for _, n := range ev.controlPlanes() {
		line, ok := ev.firstLine(n.Name, errTooManyLearners)
		if !ok || len(main.Members) == 0 {
			// Without a member list, whether it got in is unknown.
			continue
		}

		if _, member := main.Member(n.Name, n.Address); member {
			// Joiners wait in line behind learners that Talos promotes, slowly
			// with many control planes (v1.12's promote loop stalls on the
			// endpoints of members not running yet, talos #14097): a queue,
			// not a stuck slot. The slot was stuck when the learner holding
			// it was never promoted but removed, or wiped, to free it.
			blocked, by, promoted := ev.slotTaken(n.Name, line.At)
			if blocked < ev.talos(blockedLong) || promoted {
				continue
			}

			out = append(out, diag("too-many-learners", n.Name,
				fmt.Sprintf("%s was refused by etcd while %s held the learner slot for %s", n.Name, by, ev.span(blocked)),
				line.Text, line.At))

			continue
		}

		state := "unknown"
		if n.Etcd != nil {
			state = n.Etcd.State + " " + n.Etcd.Message
		}

		out = append(out, diag("too-many-learners", n.Name,
			fmt.Sprintf("%s cannot join etcd: the cluster already has %d learner(s), the limit; its etcd service is %s", n.Name, main.Learners(), state),
			line.Text, line.At))
	}

	return out
}

// slotTaken is how long, after a refusal at `at`, one other learner kept the
// slot node was waiting for: the longest stretch any single learner held it
// (until its promotion, or until node got in itself), who held it and
// whether that learner was promoted in the end.
func (ev *Evidence) slotTaken(node string, at time.Duration) (held time.Duration, by string, promoted bool) {
	joined, ok := ev.LearnerSince(node)
	if !ok {
		joined = ev.Now
	}

	for _, o := range ev.controlPlanes() {
		since, ok := ev.LearnerSince(o.Name)
		if o.Name == node || !ok || since > joined {
			continue
		}

		end, wasPromoted := ev.PromotedAt(o.Name)
		if !wasPromoted || end > joined {
			// Still a learner when node got in: the slot was freed by its
			// removal (a promotion after that is of a later join).
			end, wasPromoted = joined, false
		}

		if d := end - max(since, at); d > held {
			held, by, promoted = d, o.Name, wasPromoted
		}
	}

	return held, by, promoted
}

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
			l.started.UTC().Format(time.RFC3339), ev.talosTime(running)))
	}

	if l.seen {
		parts = append(parts, fmt.Sprintf("learner since %s", ev.span(l.since)))
	}

	if len(parts) == 0 {
		return "how long it has been a learner is unknown"
	}

	return strings.Join(parts, ", ")
}

// learnerNotPromoted: a learner whose promote loop gave up, or whose 10-minute
// promote window has passed, stays a learner for good; nothing in Talos retries
// (talos #5794, #7903, field report FR-000).
func learnerNotPromoted(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, l := range ev.learners() {
		if !l.given(ev) {
			continue
		}

		evidence := l.runningFor(ev) + ", promote window " + ev.talosTime(ev.PromoteWindow)
		at := ev.Now

		if l.hasFailed {
			evidence = l.failed.Text + "\n(" + evidence + ")"
			at = l.failed.At
		}

		out = append(out, diag("learner-not-promoted", l.name,
			fmt.Sprintf("member %s (%s) is a learner whose promotion window has closed; it will never be promoted%s",
				l.member.IDString(), l.member.Hostname, syncNote(ev, l.name)),
			evidence, at))
	}

	return out
}

// learnerPromotionPending: a learner inside its promote window, with no sign
// that Talos gave up. It may still be promoted; the diagnosis says until when,
// and what would make it never happen.
func learnerPromotionPending(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, l := range ev.learners() {
		if l.given(ev) {
			continue
		}

		var msg string

		switch {
		case l.known:
			msg = fmt.Sprintf("member %s (%s) is still a learner, %s into its %s promote window: Talos may still promote it, and gives up in %s",
				l.member.IDString(), l.member.Hostname, ev.talosTime(l.age), ev.talosTime(ev.PromoteWindow), ev.talosTime(ev.PromoteWindow-l.age))

			if !l.started.IsZero() && !l.seen {
				msg += fmt.Sprintf(" (at %s by the node's clock)", l.started.Add(ev.PromoteWindow).UTC().Format(time.RFC3339))
			}
		case l.node == nil:
			msg = fmt.Sprintf("member %s (%s) is a learner on a node that was not examined: whether Talos is still promoting it is unknown",
				l.member.IDString(), l.member.Hostname)
		default:
			msg = fmt.Sprintf("member %s (%s) is a learner, but its node does not show how long its etcd has been running: whether Talos is still promoting it is unknown",
				l.member.IDString(), l.member.Hostname)
		}

		if l.logged && !l.joined {
			msg += fmt.Sprintf("; its machined log of this boot shows no join (%q): if etcd started from its data directory, Talos runs no promote loop and it will never be promoted", joinNag)
		}

		evidence := l.runningFor(ev) + ", no \"failed promoting member\" in its machined log"
		if l.node != nil && l.node.Mode != history.ModeConfigured {
			evidence = l.name + " is " + l.node.Mode + ": " + l.node.APIError
		}

		out = append(out, diag("learner-promotion-pending", l.name, msg+syncNote(ev, l.name), evidence, ev.Now))
	}

	return out
}

// refusedLong is how long (Talos time) the leader must have kept refusing a
// learner's promotion to count: the first attempts come before any learner has
// caught up, in every healthy join.
const refusedLong = 30 * time.Second

// learnerNotSynced: the leader kept refusing to promote a learner that was
// behind (talos #5350, #13710): "rejecting promote learner: learner is not
// ready" in its etcd log, which names no member, so it is attributed to the
// node that was a learner at that moment.
func learnerNotSynced(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.controlPlanes() {
		refusals := ev.leaderRefusals(n.Name)
		if len(refusals) == 0 {
			continue
		}

		first, last := refusals[0], refusals[len(refusals)-1]
		if last.At-first.At < ev.talos(refusedLong) {
			continue
		}

		out = append(out, diag("learner-not-synced", n.Name,
			fmt.Sprintf("%s's promotion was refused for %s while its etcd learner was not in sync with the leader%s",
				n.Name, ev.span(last.At-first.At), syncNote(ev, n.Name)),
			last.Text, last.At))
	}

	return out
}

// leaderRefusals lists, in time order, the "learner is not ready" refusals in
// any etcd log while node was a learner.
// refusalsUntil is when the leader's refusals stop being about node's learner:
// at its promotion, as its own log says it or as it is first seen, or when
// another node became the learner (etcd's refusal names no member, and
// there is one learner at a time).
func (ev *Evidence) refusalsUntil(node string, since time.Duration) (time.Duration, bool) {
	until, ended := ev.PromotedAt(node)

	end := func(at time.Duration) {
		if !ended || at < until {
			until, ended = at, true
		}
	}

	if l, ok := ev.firstLineAfter(node, since, history.PromotedLine); ok {
		end(l.At)
	}

	for _, o := range ev.controlPlanes() {
		if other, ok := ev.LearnerSince(o.Name); ok && o.Name != node && other > since {
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

// staleLearner: a learner that was added but never started (empty name) blocks
// every later join, and no node is going to start it.
func staleLearner(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, m := range ev.Final.Main().Members {
		if !m.IsLearner || m.Hostname != "" {
			continue
		}

		owner := ""

		for _, n := range ev.Final.Ordered() {
			for _, u := range m.PeerURLs {
				if history.HostOf(u) == n.Address {
					owner = n.Name
				}
			}
		}

		out = append(out, diag("stale-learner", owner,
			fmt.Sprintf("member %s %v was added as a learner but never started", m.IDString(), m.PeerURLs),
			fmt.Sprintf("EtcdMemberList: id %s, hostname \"\", is_learner true, peer URLs %v", m.IDString(), m.PeerURLs), ev.Now))
	}

	return out
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
