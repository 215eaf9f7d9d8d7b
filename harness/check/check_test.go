package check

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/target"
)

const (
	cp1 = "127.0.9.2"
	cp2 = "127.0.9.3"
	cp3 = "127.0.9.4"
)

func member(id uint64, name, ip string, learner bool) Member {
	return Member{ID: id, Hostname: name, PeerURLs: []string{"https://" + ip + ":2380"}, IsLearner: learner}
}

func running(healthy bool, msg string) *Service {
	return &Service{State: "Running", Message: "Started task etcd (PID 2) for container etcd", Healthy: healthy, HealthMessage: msg}
}

var preparing = &Service{State: "Preparing", Message: "Running pre state", HealthUnknown: true}

// obs builds a three-control-plane observation; f adjusts it.
func obs(f func(o *Observation)) *Observation {
	o := NewObservation(10*time.Second, []string{"cp1", "cp2", "cp3"})

	for name, ip := range map[string]string{"cp1": cp1, "cp2": cp2, "cp3": cp3} {
		o.Nodes[name] = &NodeObservation{Name: name, Address: ip, Role: target.ControlPlane, Mode: ModeConfigured, Stage: "running"}
	}

	f(o)

	return o
}

func converged(o *Observation) {
	ms := []Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false), member(3, "cp3", cp3, false)}

	for _, n := range o.Nodes {
		n.Etcd = running(true, "")
		n.Members = ms
	}
}

func TestClustersAndConvergence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         *Observation
		clusters  int
		voters    int
		learners  int
		converged bool
	}{
		{"three voters", obs(converged), 1, 3, 0, true},
		{"learner stuck", obs(func(o *Observation) {
			ms := []Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, true)}
			o.Nodes["cp1"].Etcd, o.Nodes["cp1"].Members = running(true, ""), ms
			o.Nodes["cp2"].Etcd = running(false, errLearnerRPC)
			o.Nodes["cp3"].Etcd = preparing
		}), 1, 1, 1, false},
		{"views from different moments are one cluster", obs(func(o *Observation) {
			converged(o)
			o.Nodes["cp3"].Members = []Member{member(1, "cp1", cp1, false), member(3, "cp3", cp3, false)}
		}), 1, 3, 0, true},
		{"split brain", obs(func(o *Observation) {
			converged(o)
			o.Nodes["cp1"].Members = []Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false)}
			o.Nodes["cp2"].Members = o.Nodes["cp1"].Members
			o.Nodes["cp3"].Members = []Member{member(9, "cp3", cp3, false)}
		}), 2, 2, 0, false},
		{"node in maintenance", obs(func(o *Observation) {
			converged(o)
			o.Nodes["cp3"].Mode, o.Nodes["cp3"].Members, o.Nodes["cp3"].Etcd = ModeMaintenance, nil, nil
		}), 1, 3, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(tc.o.Clusters()); got != tc.clusters {
				t.Errorf("clusters %d, want %d", got, tc.clusters)
			}

			out := tc.o.Outcome()
			if out.Voters != tc.voters || out.Learners != tc.learners || out.Converged != tc.converged {
				t.Errorf("outcome voters=%d learners=%d converged=%v, want %d %d %v", out.Voters, out.Learners, out.Converged, tc.voters, tc.learners, tc.converged)
			}
		})
	}
}

func TestDiagnose(t *testing.T) {
	stuck := obs(func(o *Observation) {
		ms := []Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, true)}
		o.Nodes["cp1"].Etcd, o.Nodes["cp1"].Members = running(true, ""), ms
		o.Nodes["cp1"].Status = &EtcdStatus{MemberID: 1, Leader: 1, RaftIndex: 2168, AppliedIndex: 2168}
		o.Nodes["cp2"].Etcd = running(false, errLearnerRPC)
		o.Nodes["cp2"].Status = &EtcdStatus{MemberID: 2, Leader: 1, IsLearner: true, RaftIndex: 2168, AppliedIndex: 2168}
		o.Nodes["cp3"].Etcd = preparing
	})

	logs := map[string][]LogLine{
		"cp2": {{At: 9 * time.Second, Text: "failed promoting member: 1 error(s) occurred:\n\ttimeout"}},
		"cp3": {{At: 3 * time.Second, Text: "retrying error: error adding member: " + errTooManyLearners}},
	}

	for _, tc := range []struct {
		name   string
		ev     Evidence
		want   []string // code@node
		absent []string
	}{
		{
			name: "seed 000: learner never promoted, third node refused",
			ev:   Evidence{Final: stuck, Logs: func(n string) []LogLine { return logs[n] }, PromoteWindow: 10 * time.Second, Now: 14 * time.Second},
			want: []string{"learner-not-promoted@cp2", "too-many-learners@cp3"},
		},
		{
			name: "learner still inside its window, no failure logged",
			ev: Evidence{
				Final:         stuck,
				LearnerSince:  func(string) (time.Duration, bool) { return 5 * time.Second, true },
				Logs:          func(string) []LogLine { return nil },
				PromoteWindow: 10 * time.Second, Now: 8 * time.Second,
			},
			absent: []string{"learner-not-promoted", "too-many-learners"},
		},
		{
			name: "learner past its window without a log line",
			ev: Evidence{
				Final:         stuck,
				LearnerSince:  func(string) (time.Duration, bool) { return time.Second, true },
				PromoteWindow: 10 * time.Second, Now: 12 * time.Second,
			},
			want: []string{"learner-not-promoted@cp2"},
		},
		{
			name: "a refusal long ago says nothing when no member list answers",
			ev: Evidence{
				Final: obs(func(o *Observation) {
					o.Nodes["cp1"].Etcd, o.Nodes["cp1"].MembersErr = running(false, "context deadline exceeded"), "context deadline exceeded"
					for _, n := range []string{"cp2", "cp3"} {
						o.Nodes[n].Mode, o.Nodes[n].APIError = ModeDown, "rpc error: code = Unavailable desc = connection error: desc = \"transport: authentication handshake failed: EOF\""
					}
				}),
				Logs: func(n string) []LogLine { return logs[n] },
			},
			want:   []string{"api-unreachable@cp2", "api-unreachable@cp3", "no-quorum@"},
			absent: []string{"too-many-learners"},
		},
		{
			name: "stale learner",
			ev: Evidence{Final: obs(func(o *Observation) {
				ms := []Member{member(1, "cp1", cp1, false), member(7, "", cp3, true)}
				o.Nodes["cp1"].Etcd, o.Nodes["cp1"].Members = running(true, ""), ms
				o.Nodes["cp3"].Etcd = preparing
			})},
			want: []string{"stale-learner@cp3"},
		},
		{
			name: "half-applied config",
			ev: Evidence{
				Final: obs(func(o *Observation) { o.Nodes["cp2"].Mode = ModeMaintenance }),
				Events: []eventlog.Event{{TMs: 100, Node: "cp2", Kind: "orchestrator.error",
					Msg: "ApplyConfiguration cp2: rpc error: code = Unavailable desc = connection reset"}},
			},
			want: []string{"node-in-maintenance@cp2"},
		},
		{
			name: "apply reply lost, then the insecure retry is refused",
			ev: Evidence{
				Final: obs(converged),
				Events: []eventlog.Event{
					{TMs: 100, Node: "cp2", Kind: "orchestrator.error", Msg: "ApplyConfiguration cp2: rpc error: code = DeadlineExceeded desc = context deadline exceeded"},
					{TMs: 300, Node: "cp2", Kind: "node.left-maintenance", Msg: "maintenance → configured"},
					{TMs: 400, Node: "cp2", Kind: "orchestrator.error", Msg: `ApplyConfiguration cp2: rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: certificate required"`},
				},
			},
			want: []string{"apply-reply-lost@cp2", "tls-certificate-required@cp2"},
		},
		{
			name: "invalid config",
			ev: Evidence{Final: obs(converged), Events: []eventlog.Event{{TMs: 5, Node: "cp1", Kind: "orchestrator.error",
				Msg: "ApplyConfiguration cp1: rpc error: code = InvalidArgument desc = configuration validation failed: 1 error occurred:\n\t* install.extraKernelArgs and install.grubUseUKICmdline can't be used together"}}},
			want: []string{"config-invalid@cp1"},
		},
		{
			name: "split brain",
			ev: Evidence{Final: obs(func(o *Observation) {
				converged(o)
				o.Nodes["cp1"].Members = []Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false)}
				o.Nodes["cp2"].Members = o.Nodes["cp1"].Members
				o.Nodes["cp3"].Members = []Member{member(9, "cp3", cp3, false)}
			})},
			want: []string{"split-brain@cp3"},
		},
		{
			name: "no quorum",
			ev: Evidence{Final: obs(func(o *Observation) {
				converged(o)
				for _, n := range o.Nodes {
					n.Etcd = running(false, "context deadline exceeded")
				}
			})},
			want: []string{"no-quorum@"},
		},
		{
			name:   "healthy cluster has nothing to say",
			ev:     Evidence{Final: obs(converged)},
			absent: []string{"too-many-learners", "learner-not-promoted", "stale-learner", "node-in-maintenance", "split-brain", "no-quorum"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diagnose(&tc.ev)

			var have []string
			for _, d := range got {
				have = append(have, d.Code+"@"+d.Node)

				if d.Evidence == "" || d.Message == "" {
					t.Errorf("%s on %s has no evidence or message", d.Code, d.Node)
				}
			}

			for _, w := range tc.want {
				found := false

				for _, h := range have {
					if h == w {
						found = true
					}
				}

				if !found {
					t.Errorf("missing %s in %v", w, have)
				}
			}

			for _, a := range tc.absent {
				for _, h := range have {
					if strings.HasPrefix(h, a+"@") {
						t.Errorf("unexpected %s", h)
					}
				}
			}
		})
	}
}

func TestStripTimestamp(t *testing.T) {
	for in, want := range map[string]string{
		"2026/11/22 06:41:19 retrying error: timeout": "retrying error: timeout",
		"\ttimeout":                   "\ttimeout",
		"short":                       "short",
		"2026/13/99 xx:xx:xx message": "2026/13/99 xx:xx:xx message",
	} {
		if got := stripTimestamp(in); got != want {
			t.Errorf("stripTimestamp(%q) = %q, want %q", in, got, want)
		}
	}
}
