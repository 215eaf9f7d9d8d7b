package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/target"
)

// Final observes every node once more, in parallel, and records it as the
// run's last look at them. From then on the periodic observations are no
// longer recorded (they go on feeding triggers), so the final look is the
// history's last state, until Thaw: a verdict drawn from it is the one the
// run's settle judged steady.
func (o *Observer) Final(ctx context.Context) *history.Observation {
	o.recMu.Lock()
	o.frozen = true
	o.recMu.Unlock()

	obs := o.Poll(ctx)

	for _, n := range obs.Ordered() {
		o.answer(n.Name, obs.At, n)
		o.rec.Observe(obs.At, n, true)
	}

	o.narrate()

	return obs
}

// Thaw records the periodic observations again after a final look that did
// not end the run.
func (o *Observer) Thaw() {
	o.recMu.Lock()
	o.frozen = false
	o.recMu.Unlock()
}

// record stores the observation, emits transition events, starts log followers
// for newly configured nodes and notifies subscribers.
func (o *Observer) record(ctx context.Context, obs *history.Observation) {
	o.mu.Lock()
	prev := o.latest
	o.mu.Unlock()

	o.recMu.Lock()
	if !o.frozen {
		for _, n := range obs.Ordered() {
			o.rec.Observe(obs.At, n, false)
		}
	}
	o.recMu.Unlock()

	o.narrate()
	o.transitions(prev, obs)

	o.mu.Lock()
	o.latest = obs
	subs := append([]chan struct{}(nil), o.subs...)
	o.mu.Unlock()

	for _, n := range obs.Ordered() {
		if n.Mode == history.ModeConfigured {
			o.follow(ctx, n.Name, n.Role == target.ControlPlane)
		}
	}

	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// narrate tells the event log of the nodes' API mode changes that the live
// evidence holds and were not told yet (kind node.left-maintenance for a
// node leaving maintenance, node.mode otherwise).
func (o *Observer) narrate() {
	var changes []judge.ModeChange

	o.live.Read(func(ev *judge.Evidence) {
		o.narrMu.Lock()
		defer o.narrMu.Unlock()

		if o.narrated < len(ev.Changes) {
			changes = slices.Clone(ev.Changes[o.narrated:])
			o.narrated = len(ev.Changes)
		}
	})

	for _, c := range changes {
		kind := "node.mode"
		if c.LeftMaintenance {
			kind = "node.left-maintenance"
		}

		// In maintenance the talosconfig client is refused by design (the
		// node's certificate is not the cluster CA's): the error, kept in
		// the history, would only alarm.
		msg := fmt.Sprintf("%s → %s", c.From, c.To)

		switch {
		case c.To == history.ModeMaintenance:
			msg += ": the maintenance API answers (insecure), the talosconfig client is not trusted yet"
		case c.APIError != "":
			msg += ": " + c.APIError
		}

		o.log.Add(c.Node, kind, msg)
	}
}

// bootTransition tells the log followers of a node's new boot, whose
// in-memory logs start again. Where the node says its boot ID, only another
// one is a new boot: a node seen down may only be cut off (a partition, an
// API too slow for a look) and still be writing the log its streams read. A
// node that never said it (a talosconfig without os:admin) is taken to boot
// anew when seen down, rebooting or resetting, as before boot IDs were read.
func (o *Observer) bootTransition(n *history.NodeObservation) {
	o.mu.Lock()
	last := o.lastBoot[n.Name]
	if n.BootID != "" {
		o.lastBoot[n.Name] = n.BootID
	}
	o.mu.Unlock()

	switch {
	case n.BootID != "" && last != "" && n.BootID != last:
		o.newBoot(n.Name, true)
	case last == "" && n.BootID == "" && (n.Mode == history.ModeDown || n.Stage == "rebooting" || n.Stage == "resetting"):
		o.newBoot(n.Name, false)
	}
}

func (o *Observer) transitions(prev, cur *history.Observation) {
	for _, n := range cur.Ordered() {
		var p *history.NodeObservation
		if prev != nil {
			p = prev.Nodes[n.Name]
		}

		o.bootTransition(n)

		if n.Stage != "" && (p == nil || p.Stage != n.Stage) {
			o.log.Add(n.Name, "node.stage", n.Stage)
		}

		if n.Etcd != nil && (p == nil || p.Etcd == nil || p.Etcd.State != n.Etcd.State || p.Etcd.Message != n.Etcd.Message) {
			o.log.Add(n.Name, "service.etcd", n.Etcd.State+": "+n.Etcd.Message)
		}

		if n.APIServer != nil && (p == nil || p.APIServer == nil || p.APIServer.Ready != n.APIServer.Ready) {
			state := "ready"
			if !n.APIServer.Ready {
				state = "not ready: " + n.APIServer.Error
			}

			o.log.Add(n.Name, "kube.apiserver", state)
		}

		if pod := n.APIServerPod; pod != nil && (p == nil || p.APIServerPod == nil || pod.Running != p.APIServerPod.Running || pod.Restarts != p.APIServerPod.Restarts) {
			o.log.Add(n.Name, "kube.apiserver-pod", "kube-apiserver static pod: "+pod.String())
		}

		if n.APIServer != nil && n.APIServer.Endpoints != nil && (p == nil || p.APIServer == nil ||
			strings.Join(p.APIServer.Endpoints, " ") != strings.Join(n.APIServer.Endpoints, " ")) {
			o.log.Add(n.Name, "kube.endpoints", "kubernetes endpoints: ["+strings.Join(n.APIServer.Endpoints, " ")+"]")
		}
	}

	o.membershipTransitions(prev, cur)
}

func (o *Observer) membershipTransitions(prev, cur *history.Observation) {
	before := map[uint64]history.Member{}

	if prev != nil {
		for _, c := range prev.Clusters() {
			for _, m := range c.Members {
				before[m.ID] = m
			}
		}
	}

	for _, c := range cur.Clusters() {
		for _, m := range c.Members {
			node := memberNode(cur, m)
			old, existed := before[m.ID]

			switch {
			case !existed && m.IsLearner:
				o.log.Add(node, "etcd.learner-added", fmt.Sprintf("member %s %s added as learner%s", m.IDString(), history.DisplayName(m), unstarted(m)))
			case !existed:
				o.log.Add(node, "etcd.member-added", fmt.Sprintf("member %s %s is a voting member", m.IDString(), history.DisplayName(m)))
			case old.IsLearner && !m.IsLearner:
				o.log.Add(node, "etcd.promoted", fmt.Sprintf("member %s %s promoted to voter", m.IDString(), history.DisplayName(m)))
			case old.Hostname == "" && m.Hostname != "":
				o.log.Add(node, "etcd.member-started", fmt.Sprintf("member %s started as %s", m.IDString(), m.Hostname))
			}

			delete(before, m.ID)
		}
	}

	for _, m := range before {
		if hasEtcdView(cur) {
			o.log.Add(memberNode(cur, m), "etcd.member-removed", fmt.Sprintf("member %s %s removed", m.IDString(), history.DisplayName(m)))
		}
	}
}

// hasEtcdView reports whether any node answered a member list in this poll;
// without one, members did not leave, they were just not seen.
func hasEtcdView(o *history.Observation) bool {
	for _, n := range o.Nodes {
		if len(n.Members) > 0 {
			return true
		}
	}

	return false
}

func unstarted(m history.Member) string {
	if m.Hostname == "" {
		return " (not started yet)"
	}

	return ""
}

// memberNode is the node m is the member of, or m's name when no node is
// known to be (the log line still names it).
func memberNode(cur *history.Observation, m history.Member) string {
	if node := cur.NodeOf(m); node != "" {
		return node
	}

	return m.Hostname
}
