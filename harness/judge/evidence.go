package judge

import (
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
)

// Options say how to read a history.
type Options struct {
	// Snapshot: the history is one look at a live cluster (the doctor), not
	// a run: how long a member has been a learner is only known from the
	// nodes' own clocks.
	Snapshot bool
}

// FromHistory derives the evidence of a history: the final look at the nodes,
// their logs, when each member was first seen a learner and promoted, the
// calls and the nodes' mode changes. It is a pure function of the history:
// a fold (NewEvidence, then Apply for each entry in order, as porcupine's
// Model.Step), then the final look.
func FromHistory(h history.History, opts Options) *Evidence {
	ev := NewEvidence(h, opts)

	for _, e := range h.Entries {
		ev.Apply(e)
	}

	ev.Final = h.Final()
	ev.Now = ev.Final.At

	return ev
}

// NewEvidence is the evidence of a history before its first entry: its
// start, time scale and nodes (h's entries are not read). Apply adds the
// entries; Current is the cluster as they show it. Final and Now are set by
// FromHistory, once the history is whole.
func NewEvidence(h history.History, opts Options) *Evidence {
	names := make([]string, len(h.Nodes))
	for i, n := range h.Nodes {
		names[i] = n.Name
	}

	ev := &Evidence{
		machined:       map[string][]LogLine{},
		etcd:           map[string][]LogLine{},
		learnerSince:   map[string]time.Duration{},
		promotedAt:     map[string]time.Duration{},
		refusalsFrom:   map[string]time.Duration{},
		startedAt:      map[string]time.Duration{},
		stintOf:        map[uint64]int{},
		EtcdFailed:     map[string]ServiceAt{},
		SpecWaiting:    map[string]time.Duration{},
		TimeWaiting:    map[string]ServiceAt{},
		EtcdCrashes:    map[string][]ServiceAt{},
		restarts:       map[string]int{},
		APIServerExits: map[string][]time.Duration{},
		podRestarts:    map[string]int{},
		FirstVersion:   map[string]string{},
		Reboots:        map[string][]time.Duration{},
		bootID:         map[string]string{},
		SharedIPHeld:   map[string]NodeAt{},
		LastMember:     map[string]history.Member{},
		mode:           map[string]string{},
		wasMaintenance: map[string]bool{},
		nodes:          h.Nodes,
		declared:       history.Declared(h.Nodes),
		start:          h.Start,
		cur:            history.NewObservation(0, names),
		Clock:          clock.New(h.Scale),
		Snapshot:       opts.Snapshot,
	}

	ev.PromoteWindow = ev.Clock.Wall(talosPromoteWindow)

	return ev
}

// Current is the cluster as the entries applied so far show it: every node's
// last recorded state (a node not seen yet is absent), at the last entry's
// offset. It changes as entries are applied: do not keep it.
func (ev *Evidence) Current() *history.Observation { return ev.cur }

// Apply folds the history's next entry into the evidence.
func (ev *Evidence) Apply(e history.Entry) {
	if e.Observed != nil {
		ev.cur.Nodes[e.Node] = e.Observed
	}

	ev.cur.At = e.At()
	if !ev.start.IsZero() {
		ev.cur.Wall = ev.start.Add(ev.cur.At)
	}

	switch {
	case e.Log != nil && e.Log.Source == history.LogEtcd:
		ev.etcd[e.Node] = append(ev.etcd[e.Node], LogLine{At: e.At(), Text: e.Log.Text})
	case e.Log != nil:
		ev.machined[e.Node] = append(ev.machined[e.Node], LogLine{At: e.At(), Text: e.Log.Text})
		ev.etcdFailedLine(e.Node, e.Log.Text, e.At())
	case e.Call != nil:
		ev.Calls = append(ev.Calls, CallAt{Call: *e.Call, Node: e.Node, At: e.At()})
	case e.Observed != nil:
		n := e.Observed

		if _, seen := ev.FirstVersion[n.Name]; !seen && n.Version != "" {
			ev.FirstVersion[n.Name] = n.Version
		}

		if last := ev.bootID[n.Name]; n.BootID != "" && n.BootID != last {
			if last != "" {
				ev.Reboots[n.Name] = append(ev.Reboots[n.Name], e.At())
			}

			ev.bootID[n.Name] = n.BootID
		}

		if n.HoldsSharedIP {
			ev.SharedIPHeld[n.SharedIP] = NodeAt{Node: n.Name, At: e.At()}
		}

		ev.etcdService(n, e.At())
		ev.apiServerPod(n, e.At())
		ev.timeWaiting(n, e.At())
		ev.modeChange(n, e.At())
		ev.memberships()
		ev.prevAt = e.At()
	}
}

// apiServerPod notes a look that shows a control plane's kube-apiserver
// static pod restarted again while its etcd member was a healthy voter (by
// its own etcd's status). A pod made anew (its kubelet started again)
// counts from its own restarts.
func (ev *Evidence) apiServerPod(n *history.NodeObservation, at time.Duration) {
	pod := n.APIServerPod
	if pod == nil {
		return
	}

	last, seen := ev.podRestarts[n.Name]
	ev.podRestarts[n.Name] = pod.Restarts

	if seen && pod.Restarts > last && healthyVoter(n) {
		ev.APIServerExits[n.Name] = append(ev.APIServerExits[n.Name], at)
	}
}

// healthyVoter reports whether the node's own etcd member is a voter and
// its etcd service Running and healthy, as the look shows them.
func healthyVoter(n *history.NodeObservation) bool {
	return n.Status != nil && n.Status.MemberID != 0 && !n.Status.IsLearner &&
		n.Etcd != nil && n.Etcd.State == "Running" && n.Etcd.Healthy && !n.Etcd.HealthUnknown
}

// modeChange notes a node seen in another API mode than its last.
func (ev *Evidence) modeChange(n *history.NodeObservation, at time.Duration) {
	from, ok := ev.mode[n.Name]
	if ok && from == n.Mode {
		return
	}

	if !ok {
		from = "start"
	}

	c := ModeChange{Node: n.Name, From: from, To: n.Mode, At: at}
	if n.Mode != history.ModeConfigured {
		c.APIError = n.APIError
	}

	// Leaving maintenance can pass through a moment of "down" (v1.12's
	// connection-refused window while the API switches to mutual TLS).
	if n.Mode == history.ModeConfigured && ev.wasMaintenance[n.Name] {
		c.LeftMaintenance = true
		ev.wasMaintenance[n.Name] = false
	}

	if n.Mode == history.ModeMaintenance {
		ev.wasMaintenance[n.Name] = true
	}

	ev.mode[n.Name] = n.Mode
	ev.Changes = append(ev.Changes, c)
}

// memberships notes, at the observation just applied, members first seen as
// learners and learners seen promoted, keyed by node.
func (ev *Evidence) memberships() {
	cur, prevAt := ev.cur, ev.prevAt

	for _, c := range cur.Clusters() {
		for _, m := range c.Members {
			node := ev.nodeOf(m)
			if node == "" {
				continue
			}

			_, wasLearner := ev.learnerSince[node]
			_, promoted := ev.promotedAt[node]

			// A member gets its name once its etcd has started.
			if _, started := ev.startedAt[node]; !started && m.IsLearner && m.Hostname != "" {
				ev.startedAt[node] = cur.At
			}

			switch {
			case m.IsLearner && !wasLearner:
				ev.learnerSince[node] = cur.At
				// The leader's refusals count for it from the look before it
				// was first seen (it was added in between), or from the
				// promotion of the learner before it.
				from := prevAt

				for other, at := range ev.promotedAt {
					if other != node && at > from && at <= cur.At {
						from = at
					}
				}

				ev.refusalsFrom[node] = from
			case !m.IsLearner && wasLearner && !promoted:
				ev.promotedAt[node] = cur.At
			}

			ev.stint(node, m, cur.At)
			ev.LastMember[node] = m
		}
	}

	// A learner gone from the members before its promotion was removed:
	// gone from every node's last member list, so that a view a node has
	// not refreshed yet still counts it (a removal is seen late, never
	// early).
	var lists [][]history.Member

	for _, n := range cur.Ordered() {
		if len(n.Members) > 0 {
			lists = append(lists, n.Members)
		}
	}

	if len(lists) == 0 {
		return
	}

	for i, st := range ev.stints {
		if st.ended {
			continue
		}

		listed := slices.ContainsFunc(lists, func(members []history.Member) bool {
			return slices.ContainsFunc(members, func(m history.Member) bool { return m.ID == st.id })
		})

		if !listed {
			ev.stints[i].end, ev.stints[i].ended, ev.stints[i].removed = cur.At, true, true
		}
	}
}

// stint is one member's time as a learner: from when it was first seen one
// to its promotion or its removal (end, once ended).
type stint struct {
	node    string
	id      uint64
	learner time.Duration
	end     time.Duration
	ended   bool
	removed bool
}

// stint notes member m of node at a look: a learner not seen before begins
// a stint, a voter ends its member's.
func (ev *Evidence) stint(node string, m history.Member, at time.Duration) {
	i, seen := ev.stintOf[m.ID]

	switch {
	case m.IsLearner && !seen:
		ev.stintOf[m.ID] = len(ev.stints)
		ev.stints = append(ev.stints, stint{node: node, id: m.ID, learner: at})
	case !m.IsLearner && seen && !ev.stints[i].ended:
		ev.stints[i].end, ev.stints[i].ended = at, true
	}
}

// etcdService notes a look at a node's etcd service that failed or is
// waiting to be restarted by restart.Forever.
func (ev *Evidence) etcdService(n *history.NodeObservation, at time.Duration) {
	if n.Etcd == nil {
		delete(ev.SpecWaiting, n.Name)

		return
	}

	if n.Etcd.State == "Waiting" && n.Etcd.Message == history.WaitingForEtcdSpec {
		if _, ok := ev.SpecWaiting[n.Name]; !ok {
			ev.SpecWaiting[n.Name] = at
		}
	} else {
		delete(ev.SpecWaiting, n.Name)
	}

	switch s := *n.Etcd; {
	case s.State == "Failed" && !history.FailedByStop(s.Message):
		if _, ok := ev.EtcdFailed[n.Name]; !ok {
			ev.EtcdFailed[n.Name] = ServiceAt{Service: s, At: at}
		}
	case s.Restarts > 0 || strings.Contains(s.Message, history.RestartForever):
		ev.etcdRestarts(n.Name, s, at)
	}
}

// timeWaiting notes a look at a node whose etcd or kubelet service waits
// for the time sync (its Waiting message names "time sync": services/etcd.go
// and kubelet.go Condition).
func (ev *Evidence) timeWaiting(n *history.NodeObservation, at time.Duration) {
	for _, s := range []*history.Service{n.Etcd, n.Kubelet} {
		if s != nil && s.State == "Waiting" && history.WaitsForTimeSync(s.Message) {
			// Since the first look; what it waits for as the last says.
			if w, ok := ev.TimeWaiting[n.Name]; ok {
				at = w.At
			}

			ev.TimeWaiting[n.Name] = ServiceAt{Service: *s, At: at}

			return
		}
	}

	// A look at a node that does not answer says nothing of its services.
	if n.Mode == history.ModeConfigured {
		delete(ev.TimeWaiting, n.Name)
	}
}

// etcdFailedPrefix starts the line machined logs when etcd's service goes
// Failed (service_runner.go UpdateState: "service[%s](%s): %s").
const etcdFailedPrefix = "service[etcd](Failed): "

// etcdFailedLine notes etcd's service going Failed as the node's machined
// log says it: a look at the node can miss a Failed state that an
// orchestrator ended with a reboot between two polls; the node's own log
// does not.
func (ev *Evidence) etcdFailedLine(node, text string, at time.Duration) {
	msg, ok := strings.CutPrefix(text, etcdFailedPrefix)
	if !ok || history.FailedByStop(msg) {
		return
	}

	if _, seen := ev.EtcdFailed[node]; !seen {
		ev.EtcdFailed[node] = ServiceAt{Service: history.Service{State: "Failed", Message: msg}, At: at}
	}
}

// etcdRestarts notes the restarts a look at a node's etcd shows that the
// previous look did not: by the service's own restart count, or, in a record
// made before the count was recorded, by a new restart message.
func (ev *Evidence) etcdRestarts(node string, s history.Service, at time.Duration) {
	crashes := ev.EtcdCrashes[node]

	if s.Restarts == 0 {
		if len(crashes) == 0 || crashes[len(crashes)-1].Message != s.Message || crashes[len(crashes)-1].State != s.State {
			ev.EtcdCrashes[node] = append(crashes, ServiceAt{Service: s, At: at, New: 1})
		}

		return
	}

	last := ev.restarts[node]
	if s.Restarts < last {
		last = 0 // a new run of the service, with a new event history
	}

	if s.Restarts > last {
		ev.EtcdCrashes[node] = append(crashes, ServiceAt{Service: s, At: at, New: s.Restarts - last})
	}

	ev.restarts[node] = s.Restarts
}

// nodeOf maps a member to its node as the looks so far show the nodes, else
// as the run declares them (a member can be seen on one node's list before
// its own node was looked at).
func (ev *Evidence) nodeOf(m history.Member) string {
	if node := ev.cur.NodeOf(m); node != "" {
		return node
	}

	return ev.declared.NodeOf(m)
}

// PromoteRefusals counts the leader's refusals to promote node in any etcd log
// while it was a learner: what the promote-refused trigger counts.
func (ev *Evidence) PromoteRefusals(node string) int {
	since, ok := ev.refusalsFrom[node]
	if !ok {
		return 0
	}

	until, promoted := ev.refusalsUntil(node, since)
	count := 0

	for _, lines := range ev.etcd {
		for _, l := range lines {
			if l.At >= since && (!promoted || l.At <= until) && strings.Contains(l.Text, history.RefusedPromotion) {
				count++
			}
		}
	}

	return count
}
