package judge

import (
	"fmt"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

// A verdict must not depend on the instant of the last poll. Talos's own
// health check (pkg/cluster/check) polls each condition until it holds; a
// run goes further and asks that the state it judges has held for a while:
// the run keeps observing until the state the verdict is drawn from has not
// changed for a stable period (Settled), and "converged" is only granted to a
// cluster that has been converged for that long (ConvergedSince).
//
// The stable period alone is not enough: a verdict must not be drawn while an
// observation that could change it is still on its way. The slowest of them
// is a member's etcd health check, which comes at most every HealthPeriod,
// each bounded by HealthTimeout (Talos time), and both reach wall time
// through the time scale and the target's clock floors: at 25x with the
// sim's 2 s floor on the deadline, 30 s of Talos time (1.2 s) can pass
// between two reports of one member. The state must hold for a Window that
// covers every node's next answer (Cadence).

// StateKey is what of an observation the verdict is drawn from: per node its
// API mode, boot stage, etcd service state and health and its place in the
// main cluster; the number of clusters and the main cluster's members. Error
// texts are left out: a node that keeps failing with changing messages is in
// one state.
func StateKey(o *history.Observation) string {
	var b strings.Builder

	clusters := o.Clusters()
	main := o.Main()

	fmt.Fprintf(&b, "clusters=%d converged=%t;", len(clusters), Converged(o))

	for _, n := range o.Ordered() {
		fmt.Fprintf(&b, "%s:%s/%s", n.Name, n.Mode, n.Stage)

		if n.Etcd != nil {
			fmt.Fprintf(&b, "/etcd=%s,%t", n.Etcd.State, n.Etcd.Running())
		}

		if n.Role == target.ControlPlane {
			switch m, ok := main.MemberOf(n); {
			case !ok:
				b.WriteString("/absent")
			case m.IsLearner:
				b.WriteString("/learner")
			default:
				b.WriteString("/voter")
			}
		}

		b.WriteString(";")
	}

	// Members no node is known by (stale learners, unstarted members).
	fmt.Fprintf(&b, "members=%d voters=%d", len(main.Members), main.Voters())

	return b.String()
}

// stateSince walks the history and returns the offset since which the state
// key has been what it is at the end, and that key. ok is false when not
// every node has been seen yet.
func stateSince(h history.History) (since time.Duration, key string, ok bool) {
	h.Walk(func(e history.Entry, cur *history.Observation) {
		if e.Observed == nil || len(cur.Nodes) < len(h.Nodes) {
			return
		}

		if k := StateKey(cur); !ok || k != key {
			since, key, ok = e.At(), k, true
		}
	})

	return since, key, ok
}

// Settled reports whether the state the verdict is drawn from has held for
// its window (Cadence.Window, at least stable, wall-clock) at now, the offset
// of the present moment in the run: the observer records a node only when it
// changes, so a quiet history is a steady state.
func Settled(h history.History, now time.Duration, c Cadence, stable time.Duration) bool {
	since, _, ok := stateSince(h)

	return ok && now-since >= c.For(since).Window(h.Final(), stable)
}

// SettledAtFinal reports whether the state the verdict is drawn from held for
// its window up to the run's final look (History.Final), measured as the
// judge measures how long the cluster has been converged: between recorded
// observations, never up to a present moment a slow poll may have overtaken.
func SettledAtFinal(h history.History, c Cadence, stable time.Duration) bool {
	since, _, ok := stateSince(h)
	final := h.Final()

	return ok && final.At-since >= c.For(since).Window(final, stable)
}

// Talos's etcd health check (health.Run with the etcd service's settings,
// TALOS-FIDELITY.md §1): a check starts on a ticker every HealthPeriod (at
// once when the last one overran it), each bounded by HealthTimeout. Talos
// time; a target that cannot scale the deadline all the way reports the
// clock floor HealthTimeoutFloor.
const (
	HealthPeriod       = 20 * time.Second
	HealthTimeout      = 15 * time.Second
	HealthTimeoutFloor = "etcd health check timeout"
)

// Cadence is how far apart, in wall time, the looks a verdict is drawn from
// can come: what the nodes report (their etcd health checks) and what the
// observer asks (its polls).
type Cadence struct {
	// HealthPeriod and HealthTimeout are the etcd health check's period and
	// deadline as the nodes run them, clock floors included.
	HealthPeriod, HealthTimeout time.Duration
	// Poll is the longest between two answers of one node: the slowest
	// node's poll interval plus a poll's deadline (a poll in flight).
	Poll time.Duration
	// PollSince, when set, is that part from the polls as they went since
	// a state began (check.Observer.PollCadenceSince), at most Poll: the
	// answers a verdict waits for, not the longest any could take.
	PollSince func(since time.Duration) time.Duration
}

// For is the cadence of a state that began at since.
func (c Cadence) For(since time.Duration) Cadence {
	if c.PollSince != nil {
		c.Poll = min(c.Poll, c.PollSince(since))
	}

	return c
}

// CadenceAt is the cadence of a run at scale, given the clock floors its
// target reports (the health check's deadline may be one) and the observer's
// poll cadence.
func CadenceAt(clk clock.Clock, floors []result.ClockFloor, poll time.Duration) Cadence {
	timeout := HealthTimeout

	for _, f := range floors {
		if f.What == HealthTimeoutFloor {
			timeout = max(timeout, msDuration(f.ModelledMs))
		}
	}

	return Cadence{HealthPeriod: clk.Wall(HealthPeriod), HealthTimeout: clk.Wall(timeout), Poll: poll}
}

// HealthCycle is the longest it takes, from any moment, until every running
// etcd member has reported a health check that started at or after it: the
// check in flight ends within a deadline, the next starts then or at the next
// tick (within a period), and ends within a deadline. Two reports of one
// member come at most a period and a deadline apart, so a state that held
// for a HealthCycle was confirmed by every member's health check, and one
// failed check followed by a passing one is never judged on the failure.
func (c Cadence) HealthCycle() time.Duration {
	return max(c.HealthPeriod, c.HealthTimeout) + c.HealthTimeout
}

// Window is how long, in wall time, the state seen in o must hold before a
// verdict is drawn from it: stable; every node's next answer to a poll; and,
// while a control plane's etcd runs, every member's next whole health check
// (HealthCycle) and the answer that shows it (a poll more, which also
// absorbs a loaded machine starting and ending a check late).
func (c Cadence) Window(o *history.Observation, stable time.Duration) time.Duration {
	w := max(stable, c.Poll)

	for _, n := range o.Nodes {
		if n.Role == target.ControlPlane && n.Etcd != nil && n.Etcd.State == "Running" {
			return max(w, c.HealthCycle()+c.Poll)
		}
	}

	return w
}

// Longest is the longest Window can be: with a running etcd.
func (c Cadence) Longest(stable time.Duration) time.Duration {
	return max(stable, c.HealthCycle()+c.Poll)
}

// ConvergedSince is the offset from which the cluster has been converged,
// without a break, up to the end of the history; ok is false when it is not
// converged at the end.
func ConvergedSince(h history.History) (since time.Duration, ok bool) {
	converged := false

	h.Walk(func(e history.Entry, cur *history.Observation) {
		if e.Observed == nil || len(cur.Nodes) < len(h.Nodes) {
			return
		}

		c := Converged(cur)
		if c && !converged {
			since = e.At()
		}

		converged = c
	})

	if !converged || !Converged(h.Final()) {
		return 0, false
	}

	return since, true
}
