package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

const (
	connRefused   = `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.9.3:50000: connect: connection refused"`
	promoteFailed = "failed promoting member: 1 error(s) occurred:\n\ttimeout"
	joinLine      = "etcd is waiting to join the cluster, if this node is the first node in the cluster, please run `talosctl bootstrap` against one of the following IPs:"
)

// learnerCluster is cp1 a voter, cp2 down, cp3 a learner whose etcd has been
// Running for `runningFor` (wall clock) when observed; names are the nodes' names,
// or their addresses as `talchaos doctor` names them.
func learnerCluster(byAddress bool, runningFor time.Duration) *history.Observation {
	name := func(n, ip string) string {
		if byAddress {
			return ip
		}

		return n
	}

	o := history.NewObservation(20*time.Second, []string{name("cp1", cp1), name("cp2", cp2), name("cp3", cp3)})
	o.Wall = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	ms := []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false), member(3, "cp3", cp3, true)}

	o.Nodes[name("cp1", cp1)] = &history.NodeObservation{Name: name("cp1", cp1), Address: cp1, Role: target.ControlPlane, Mode: history.ModeConfigured,
		Etcd: running(true, ""), Members: ms, Status: &history.EtcdStatus{MemberID: 1, Leader: 1, RaftIndex: 900, AppliedIndex: 900}}
	o.Nodes[name("cp2", cp2)] = &history.NodeObservation{Name: name("cp2", cp2), Address: cp2, Role: target.Worker, Mode: history.ModeDown, APIError: connRefused}

	etcd := running(false, errLearnerRPC)
	if runningFor > 0 {
		etcd.Started = o.Wall.Add(-runningFor)
	}

	o.Nodes[name("cp3", cp3)] = &history.NodeObservation{Name: name("cp3", cp3), Address: cp3, Role: target.ControlPlane, Mode: history.ModeConfigured,
		Etcd: etcd, Status: &history.EtcdStatus{MemberID: 3, Leader: 1, IsLearner: true, RaftIndex: 880, AppliedIndex: 870}}

	return o
}

func TestLearnerPromotion(t *testing.T) {
	logsOf := func(node string, lines ...string) map[string][]LogLine {
		var out []LogLine
		for _, l := range lines {
			out = append(out, LogLine{At: 15 * time.Second, Text: l})
		}

		return map[string][]LogLine{node: out}
	}

	for _, tc := range []struct {
		name string
		ev   Evidence
		code string // the diagnosis on cp3's node
		node string
		// message and evidence must contain these
		message, evidence []string
		absent            string
		// nowhere is what neither message nor evidence may contain
		nowhere []string
	}{
		{
			name:     "the promote loop gave up",
			ev:       Evidence{Final: learnerCluster(false, 2*time.Second), machined: logsOf("cp3", joinLine, promoteFailed), Clock: clock.New(60)},
			code:     "learner-not-promoted",
			node:     "cp3",
			message:  []string{"member 0000000000000003 (cp3)", "never be promoted", "raft applied index 870 of the leader's 900"},
			evidence: []string{promoteFailed, "etcd service Running since 2026-03-01T11:59:58Z (2m0s of Talos time"},
			absent:   "learner-promotion-pending",
		},
		{
			name:     "the promote window has passed by the node's clock",
			ev:       Evidence{Final: learnerCluster(false, 11*time.Second), machined: logsOf("cp3", joinLine), Clock: clock.New(60)},
			code:     "learner-not-promoted",
			node:     "cp3",
			evidence: []string{"Running since 2026-03-01T11:59:49Z (11m0s of Talos time", "promote window 10m0s"},
			absent:   "learner-promotion-pending",
		},
		{
			name: "the promote window has passed since the run saw it join",
			ev: Evidence{Final: learnerCluster(false, 0), machined: logsOf("cp3", joinLine), Clock: clock.New(60),
				learnerSince: map[string]time.Duration{"cp3": 5 * time.Second}, Now: 20 * time.Second},
			code:     "learner-not-promoted",
			node:     "cp3",
			evidence: []string{"learner since 5m0s Talos (5.0s wall)"},
			absent:   "learner-promotion-pending",
		},
		{
			name:     "still inside its window",
			ev:       Evidence{Final: learnerCluster(false, 3*time.Second), machined: logsOf("cp3", joinLine, "retrying error: etcdserver: rpc not supported for learner"), Clock: clock.New(60)},
			code:     "learner-promotion-pending",
			node:     "cp3",
			message:  []string{"still a learner, 3m0s into its 10m0s promote window", "gives up in 7m0s", "at 2026-03-01T12:00:07Z by the node's clock"},
			evidence: []string{"Running since 2026-03-01T11:59:57Z", `no "failed promoting member"`},
			absent:   "learner-not-promoted",
		},
		{
			name:    "inside its window, but no join in this boot's log",
			ev:      Evidence{Final: learnerCluster(false, 3*time.Second), machined: logsOf("cp3", "service[etcd](Running): Started task etcd (PID 2) for container etcd"), Clock: clock.New(60)},
			code:    "learner-promotion-pending",
			node:    "cp3",
			message: []string{"shows no join", "Talos runs no promote loop"},
			absent:  "learner-not-promoted",
		},
		{
			name: "a run speaks in offsets from its start, not the nodes' clocks",
			ev: Evidence{Final: learnerCluster(false, 2*time.Second), machined: logsOf("cp3", joinLine), Clock: clock.New(60),
				learnerSince: map[string]time.Duration{"cp3": 15 * time.Second}, Now: 20 * time.Second},
			code:     "learner-promotion-pending",
			node:     "cp3",
			message:  []string{"5m0s into its 10m0s promote window", "gives up in 5m0s"},
			evidence: []string{"etcd service Running since 18m0s Talos (18.0s wall), learner since 15m0s Talos (15.0s wall)"},
			nowhere:  []string{"2026", "clock"},
		},
		{
			name:    "the doctor names nodes by address",
			ev:      Evidence{Final: learnerCluster(true, 2*time.Second), machined: logsOf(cp3, joinLine, promoteFailed), Clock: clock.New(60)},
			code:    "learner-not-promoted",
			node:    cp3,
			message: []string{"member 0000000000000003 (cp3)", "raft applied index 870"},
		},
		{
			name:    "how long is unknown",
			ev:      Evidence{Final: learnerCluster(true, 0), Clock: clock.New(60)},
			code:    "learner-promotion-pending",
			node:    cp3,
			message: []string{"does not show how long", "unknown"},
			absent:  "learner-not-promoted",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diagnose(&tc.ev)

			d, ok := find(got, tc.code, tc.node)
			if !ok {
				t.Fatalf("no %s on %s in %v", tc.code, tc.node, got)
			}

			for _, w := range tc.message {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q does not contain %q", d.Message, w)
				}
			}

			for _, w := range tc.evidence {
				if !strings.Contains(d.Evidence, w) {
					t.Errorf("evidence %q does not contain %q", d.Evidence, w)
				}
			}

			for _, w := range tc.nowhere {
				if strings.Contains(d.Message+d.Evidence, w) {
					t.Errorf("%q in %q / %q", w, d.Message, d.Evidence)
				}
			}

			if _, ok := find(got, tc.absent, ""); ok && tc.absent != "" {
				t.Errorf("unexpected %s in %v", tc.absent, got)
			}

			if remedy := Remedy(d, tc.ev.Final); !strings.Contains(strings.Join(remedy, "\n"), "etcd remove-member 0000000000000003") {
				t.Errorf("remedy does not remove the learner: %q", remedy)
			}
		})
	}
}

func TestAPIUnreachable(t *testing.T) {
	t.Run("a voter that does not answer", func(t *testing.T) {
		ev := Evidence{Final: learnerCluster(false, 3*time.Second), Now: 20 * time.Second, Changes: []ModeChange{
			{Node: "cp2", From: "start", To: history.ModeConfigured, At: time.Second},
			{Node: "cp2", From: history.ModeConfigured, To: history.ModeDown, APIError: connRefused, At: 12 * time.Second},
		}}

		got := Diagnose(&ev)

		d, ok := find(got, "api-unreachable", "cp2")
		if !ok {
			t.Fatalf("no api-unreachable on cp2 in %v", got)
		}

		if d.Evidence != connRefused || d.TMs != 12000 {
			t.Errorf("evidence %q at %d ms, want the client's error at 12000 ms", d.Evidence, d.TMs)
		}

		for _, w := range []string{"cp2's Talos API does not answer", "etcd member 0000000000000002, a voting member of a cluster with 2 voter(s)", "down since 12.0s"} {
			if !strings.Contains(d.Message, w) {
				t.Errorf("message %q does not contain %q", d.Message, w)
			}
		}

		if r := Remedy(d, ev.Final); len(r) == 0 || !strings.Contains(strings.Join(r, "\n"), "talosctl -n "+cp2+" version") {
			t.Errorf("remedy %q", r)
		}

		if _, ok := find(got, "api-unreachable", "cp1"); ok {
			t.Errorf("a node that answers is called unreachable: %v", got)
		}
	})

	t.Run("answering nodes are not unreachable", func(t *testing.T) {
		o := obs(converged)
		o.Nodes["cp2"].Mode = history.ModeMaintenance

		if d, ok := find(Diagnose(&Evidence{Final: o}), "api-unreachable", ""); ok {
			t.Errorf("unexpected %v", d)
		}
	})
}

// find returns the first diagnosis with code (on node, unless node is "").
func find(ds []result.Diagnosis, code, node string) (result.Diagnosis, bool) {
	for _, d := range ds {
		if d.Code == code && (node == "" || d.Node == node) {
			return d, true
		}
	}

	return result.Diagnosis{}, false
}
