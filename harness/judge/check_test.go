package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

const (
	cp1 = "127.0.9.2"
	cp2 = "127.0.9.3"
	cp3 = "127.0.9.4"
)

func member(id uint64, name, ip string, learner bool) history.Member {
	return history.Member{ID: id, Hostname: name, PeerURLs: []string{"https://" + ip + ":2380"}, IsLearner: learner}
}

func running(healthy bool, msg string) *history.Service {
	return &history.Service{State: "Running", Message: "Started task etcd (PID 2) for container etcd", Healthy: healthy, HealthMessage: msg}
}

var preparing = &history.Service{State: "Preparing", Message: "Running pre state", HealthUnknown: true}

// obs builds a three-control-plane observation; f adjusts it.
func obs(f func(o *history.Observation)) *history.Observation {
	o := history.NewObservation(10*time.Second, []string{"cp1", "cp2", "cp3"})

	for name, ip := range map[string]string{"cp1": cp1, "cp2": cp2, "cp3": cp3} {
		o.Nodes[name] = &history.NodeObservation{Name: name, Address: ip, Role: target.ControlPlane, Mode: history.ModeConfigured, Stage: "running"}
	}

	f(o)

	return o
}

func converged(o *history.Observation) {
	ms := []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false), member(3, "cp3", cp3, false)}

	for _, n := range o.Nodes {
		n.Etcd = running(true, "")
		n.Members = ms
	}
}

func TestClustersAndConvergence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         *history.Observation
		clusters  int
		voters    int
		learners  int
		converged bool
	}{
		{"three voters", obs(converged), 1, 3, 0, true},
		{"learner stuck", obs(func(o *history.Observation) {
			ms := []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, true)}
			o.Nodes["cp1"].Etcd, o.Nodes["cp1"].Members = running(true, ""), ms
			o.Nodes["cp2"].Etcd = running(false, errLearnerRPC)
			o.Nodes["cp3"].Etcd = preparing
		}), 1, 1, 1, false},
		{"views from different moments are one cluster", obs(func(o *history.Observation) {
			converged(o)
			o.Nodes["cp3"].Members = []history.Member{member(1, "cp1", cp1, false), member(3, "cp3", cp3, false)}
		}), 1, 3, 0, true},
		{"split brain", obs(func(o *history.Observation) {
			converged(o)
			o.Nodes["cp1"].Members = []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false)}
			o.Nodes["cp2"].Members = o.Nodes["cp1"].Members
			o.Nodes["cp3"].Members = []history.Member{member(9, "cp3", cp3, false)}
		}), 2, 2, 0, false},
		{"node in maintenance", obs(func(o *history.Observation) {
			converged(o)
			o.Nodes["cp3"].Mode, o.Nodes["cp3"].Members, o.Nodes["cp3"].Etcd = history.ModeMaintenance, nil, nil
		}), 1, 3, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(tc.o.Clusters()); got != tc.clusters {
				t.Errorf("clusters %d, want %d", got, tc.clusters)
			}

			out := OutcomeOf(tc.o)
			if out.Voters != tc.voters || out.Learners != tc.learners || out.Converged != tc.converged {
				t.Errorf("outcome voters=%d learners=%d converged=%v, want %d %d %v", out.Voters, out.Learners, out.Converged, tc.voters, tc.learners, tc.converged)
			}
		})
	}
}

func TestDiagnose(t *testing.T) {
	stuck := obs(func(o *history.Observation) {
		ms := []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, true)}
		o.Nodes["cp1"].Etcd, o.Nodes["cp1"].Members = running(true, ""), ms
		o.Nodes["cp1"].Status = &history.EtcdStatus{MemberID: 1, Leader: 1, RaftIndex: 2168, AppliedIndex: 2168}
		o.Nodes["cp2"].Etcd = running(false, errLearnerRPC)
		o.Nodes["cp2"].Status = &history.EtcdStatus{MemberID: 2, Leader: 1, IsLearner: true, RaftIndex: 2168, AppliedIndex: 2168}
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
			name: "field report FR-000: learner never promoted, third node refused",
			ev:   Evidence{Final: stuck, machined: logs, PromoteWindow: 10 * time.Second, Now: 14 * time.Second},
			want: []string{"learner-not-promoted@cp2", "too-many-learners@cp3"},
		},
		{
			name: "learner still inside its window, no failure logged",
			ev: Evidence{
				Final:         stuck,
				learnerSince:  map[string]time.Duration{"cp2": 5 * time.Second},
				PromoteWindow: 10 * time.Second, Now: 8 * time.Second,
			},
			absent: []string{"learner-not-promoted", "too-many-learners"},
		},
		{
			name: "learner past its window without a log line",
			ev: Evidence{
				Final:         stuck,
				learnerSince:  map[string]time.Duration{"cp2": time.Second},
				PromoteWindow: 10 * time.Second, Now: 12 * time.Second,
			},
			want: []string{"learner-not-promoted@cp2"},
		},
		{
			name: "a refusal long ago says nothing when no member list answers",
			ev: Evidence{
				Final: obs(func(o *history.Observation) {
					o.Nodes["cp1"].Etcd, o.Nodes["cp1"].MembersErr = running(false, "context deadline exceeded"), "context deadline exceeded"
					for _, n := range []string{"cp2", "cp3"} {
						o.Nodes[n].Mode, o.Nodes[n].APIError = history.ModeDown, "rpc error: code = Unavailable desc = connection error: desc = \"transport: authentication handshake failed: EOF\""
					}
				}),
				machined: logs,
			},
			want:   []string{"api-unreachable@cp2", "api-unreachable@cp3", "no-quorum@"},
			absent: []string{"too-many-learners"},
		},
		{
			name: "a refusal long ago says nothing of a node kept out now by something else, the learner slot free",
			ev: Evidence{
				Final: obs(func(o *history.Observation) {
					ms := []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false)}
					o.Nodes["cp1"].Etcd, o.Nodes["cp1"].Members = running(true, ""), ms
					o.Nodes["cp2"].Etcd = running(true, "")
					o.Nodes["cp3"].Mode = history.ModeMaintenance
				}),
				machined: logs,
			},
			absent: []string{"too-many-learners"},
		},
		{
			name: "stale learner",
			ev: Evidence{Final: obs(func(o *history.Observation) {
				ms := []history.Member{member(1, "cp1", cp1, false), member(7, "", cp3, true)}
				o.Nodes["cp1"].Etcd, o.Nodes["cp1"].Members = running(true, ""), ms
				o.Nodes["cp3"].Etcd = preparing
			})},
			want: []string{"stale-learner@cp3"},
		},
		{
			name: "half-applied config",
			ev: Evidence{
				Final: obs(func(o *history.Observation) { o.Nodes["cp2"].Mode = history.ModeMaintenance }),
				Calls: []CallAt{apply("cp2", 100, "Unavailable", "connection reset", history.FailureNoAnswer)},
			},
			want: []string{"node-in-maintenance@cp2"},
		},
		{
			name: "apply reply lost, then the insecure retry is refused",
			ev: Evidence{
				Final: obs(converged),
				Calls: []CallAt{
					apply("cp2", 100, "DeadlineExceeded", "context deadline exceeded", history.FailureNoAnswer),
					apply("cp2", 400, "Unavailable", `connection error: desc = "error reading server preface: remote error: tls: certificate required"`, history.FailureCertificateRequired),
				},
				Changes: []ModeChange{{Node: "cp2", From: history.ModeMaintenance, To: history.ModeConfigured, LeftMaintenance: true, At: 300 * time.Millisecond}},
			},
			want: []string{"apply-reply-lost@cp2", "tls-certificate-required@cp2"},
		},
		{
			name: "invalid config",
			ev: Evidence{Final: obs(converged), Calls: []CallAt{apply("cp1", 5, "InvalidArgument",
				"configuration validation failed: 1 error occurred:\n\t* install.extraKernelArgs and install.grubUseUKICmdline can't be used together", history.FailureNone)}},
			want: []string{"config-invalid@cp1"},
		},
		{
			name: "split brain",
			ev: Evidence{Final: obs(func(o *history.Observation) {
				converged(o)
				o.Nodes["cp1"].Members = []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false)}
				o.Nodes["cp2"].Members = o.Nodes["cp1"].Members
				o.Nodes["cp3"].Members = []history.Member{member(9, "cp3", cp3, false)}
			})},
			want: []string{"split-brain@cp3"},
		},
		{
			name: "no quorum",
			ev: Evidence{Final: obs(func(o *history.Observation) {
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
		{
			// FR-000 as its operator saw it: only cp1's API server serves;
			// cp2's member is a learner, cp3 never joined.
			name:   "kubernetes endpoints 1/3",
			ev:     Evidence{Final: withAPIServers(stuck, map[string]bool{"cp1": true}, []string{cp1})},
			want:   []string{"apiserver-not-in-service@cp2", "apiserver-not-in-service@cp3"},
			absent: []string{"apiserver-not-in-service@cp1"},
		},
		{
			name:   "kubernetes endpoints 3/3",
			ev:     Evidence{Final: withAPIServers(obs(converged), map[string]bool{"cp1": true, "cp2": true, "cp3": true}, []string{cp1, cp2, cp3})},
			absent: []string{"apiserver-not-in-service"},
		},
		{
			name:   "no Kubernetes, no API server diagnosis",
			ev:     Evidence{Final: stuck},
			absent: []string{"apiserver-not-in-service"},
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
					if h == a || strings.HasPrefix(h, a+"@") {
						t.Errorf("unexpected %s", h)
					}
				}
			}
		})
	}
}

// apply is an insecure ApplyConfiguration call to node that ended at ms.
func apply(node string, ms int64, code, msg string, f history.Failure) CallAt {
	return CallAt{Node: node, At: time.Duration(ms) * time.Millisecond,
		Call: history.Call{RPC: "ApplyConfiguration", Client: history.ClientInsecure, Code: code, Message: msg, Failure: f}}
}

// withAPIServers is o with an API server on every control plane, ready where
// ready says, each ready one listing endpoints.
func withAPIServers(o *history.Observation, ready map[string]bool, endpoints []string) *history.Observation {
	c := history.NewObservation(o.At, []string{"cp1", "cp2", "cp3"})

	for name, n := range o.Nodes {
		cp := *n
		cp.APIServer = &history.APIServer{Ready: ready[name], Error: "readyz: etcd failed: reason withheld"}

		if ready[name] {
			cp.APIServer.Error, cp.APIServer.Endpoints = "", endpoints
		}

		c.Nodes[name] = &cp
	}

	return c
}
