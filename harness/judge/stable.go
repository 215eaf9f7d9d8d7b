package judge

import (
	"fmt"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// A verdict must not depend on the instant of the last poll. Talos's own
// health check (pkg/cluster/check) polls each condition until it holds; a
// run goes further and asks that the state it judges has held for a while:
// the run keeps observing until the state the verdict is drawn from has not
// changed for a stable period (Settled), and "converged" is only granted to a
// cluster that has been converged for that long (ConvergedSince).

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
			switch m, ok := main.Member(n.Name, n.Address); {
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
// at least stable (wall-clock) at now, the offset of the present moment in
// the run: the observer records a node only when it changes, so a quiet
// history is a steady state.
func Settled(h history.History, now, stable time.Duration) bool {
	since, _, ok := stateSince(h)

	return ok && now-since >= stable
}

// SettledAtFinal reports whether the state the verdict is drawn from held for
// at least stable up to the run's final look (History.Final), measured as the
// judge measures how long the cluster has been converged: between recorded
// observations, never up to a present moment a slow poll may have overtaken.
func SettledAtFinal(h history.History, stable time.Duration) bool {
	since, _, ok := stateSince(h)

	return ok && h.Final().At-since >= stable
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
