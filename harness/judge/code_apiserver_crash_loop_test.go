package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
)

// A kube-apiserver seen restarting while its etcd member was a healthy
// voter, and not ready at the end, is the API server's own failure; one
// that restarted only while its member was a learner or its etcd
// unhealthy waited on etcd (apiserver-not-in-service says so), and one that
// serves at the end is not diagnosed, however often it was restarted. A node
// whose API server is not in service is diagnosed once: a crash loop is not
// also apiserver-not-in-service, whose remedy looks at etcd.
func TestAPIServerCrashLoop(t *testing.T) {
	start := time.Now()
	nodes := []history.Node{{Name: "cp1", Role: "controlplane", Address: "198.18.9.2"}}
	exit1 := 1

	type look struct {
		pod              *history.StaticPod
		learner, healthy bool
	}

	cp1 := func(l look) *history.NodeObservation {
		return &history.NodeObservation{Name: "cp1", Address: "198.18.9.2", Role: "controlplane", Mode: history.ModeConfigured,
			Etcd:         &history.Service{State: "Running", Healthy: l.healthy},
			Kubelet:      &history.Service{State: "Running", Healthy: true, Started: start},
			Members:      []history.Member{{ID: 0xa1, Hostname: "cp1", PeerURLs: []string{"https://198.18.9.2:2380"}, IsLearner: l.learner}},
			Status:       &history.EtcdStatus{MemberID: 0xa1, Leader: 0xa1, IsLearner: l.learner},
			APIServer:    &history.APIServer{Error: "dial tcp 198.18.9.2:6443: connect: connection refused"},
			APIServerPod: l.pod,
		}
	}

	pod := func(running, ready bool, restarts int) *history.StaticPod {
		p := &history.StaticPod{Running: running, Ready: ready, Restarts: restarts}
		if !running {
			p.Waiting = "CrashLoopBackOff"
		}

		if restarts > 0 {
			p.LastExit = &exit1
		}

		return p
	}

	for _, tc := range []struct {
		name  string
		looks []look
		want  string // a word of the message; "" for no diagnosis
	}{
		{"backing off on a healthy voter", []look{{pod(true, false, 0), false, true}, {pod(false, false, 1), false, true}, {pod(false, false, 2), false, true}},
			"CrashLoopBackOff, 2 restarts, last exit code 1"},
		{"in one of its short runs", []look{{pod(false, false, 1), false, true}, {pod(true, false, 2), false, true}}, "running, not ready, 2 restarts"},
		{"ready again at the end", []look{{pod(true, false, 0), false, true}, {pod(false, false, 1), false, true}, {pod(true, true, 1), false, true}}, ""},
		{"restarted only while a learner", []look{{pod(true, false, 0), true, true}, {pod(false, false, 1), true, true}, {pod(false, false, 1), false, true}}, ""},
		{"restarted only while etcd was unhealthy", []look{{pod(true, false, 0), false, false}, {pod(false, false, 2), false, false}, {pod(false, false, 2), false, true}}, ""},
		{"on a learner at the end", []look{{pod(true, false, 0), false, true}, {pod(false, false, 1), false, true}, {pod(false, false, 1), true, true}}, ""},
		{"first seen restarted: when is unknown", []look{{pod(false, false, 3), false, true}}, ""},
		{"never restarted", []look{{pod(true, false, 0), false, true}, {pod(true, false, 0), false, true}}, ""},
		{"its pod unseen", []look{{nil, false, true}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var entries []history.Entry

			for i, l := range tc.looks {
				entries = append(entries, history.Entry{WallMs: int64(1000 * (i + 1)), Node: "cp1", Observed: cp1(l)})
			}

			h := history.History{Start: start, Scale: 60, Nodes: nodes, Entries: entries}

			var got []string

			notInService := 0

			for _, d := range Diagnose(FromHistory(h, Options{})) {
				switch d.Code {
				case "apiserver-crash-loop":
					got = append(got, d.Message+"\n"+d.Evidence)
				case "apiserver-not-in-service":
					notInService++
				}
			}

			if len(got)+notInService != 1 {
				t.Errorf("%d apiserver-crash-loop and %d apiserver-not-in-service diagnoses of cp1, which no API server lists; want one in all", len(got), notInService)
			}

			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("diagnosed: %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "voter")):
				t.Errorf("diagnoses %q, want one with %q", got, tc.want)
			}
		})
	}
}
