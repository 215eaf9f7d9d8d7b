package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
)

// A worker whose Node is absent is diagnosed once its kubelet has run for a
// lease, a Node NotReady at once; an etcd waiting for its spec alone once it
// has for two Talos minutes.
func TestNodeNotReadyAndEtcdSpecMissing(t *testing.T) {
	start := time.Now()
	nodes := []history.Node{
		{Name: "cp1", Role: "controlplane", Address: "198.18.9.2"},
		{Name: "w1", Role: "worker", Address: "198.18.9.5"},
	}

	cp1 := func(kube []history.KubeNode, etcd string) *history.NodeObservation {
		return &history.NodeObservation{Name: "cp1", Address: "198.18.9.2", Role: "controlplane", Mode: history.ModeConfigured,
			Etcd:      &history.Service{State: map[bool]string{true: "Waiting", false: "Running"}[etcd != ""], Message: etcd},
			APIServer: &history.APIServer{Ready: true, Endpoints: []string{"198.18.9.2"}, Nodes: kube}}
	}
	w1 := &history.NodeObservation{Name: "w1", Address: "198.18.9.5", Role: "worker", Mode: history.ModeConfigured,
		Kubelet: &history.Service{State: "Running", Healthy: true, Started: start}}
	look := func(ms int64, n *history.NodeObservation) history.Entry {
		return history.Entry{WallMs: ms, Node: n.Name, Observed: n}
	}
	ready := []history.KubeNode{{Name: "cp1", Address: "198.18.9.2", Ready: true}}
	unknown := append(ready, history.KubeNode{Name: "w1", Address: "198.18.9.5", Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."})

	for _, tc := range []struct {
		name    string
		entries []history.Entry
		want    []string // code@node, with a word of the message
	}{
		{"unregistered, kubelet running for a minute", []history.Entry{look(1000, w1), look(60_000, cp1(ready, ""))}, []string{"node-not-ready@w1 never registered"}},
		{"unregistered, kubelet running for 10 s", []history.Entry{look(1000, w1), look(10_000, cp1(ready, ""))}, nil},
		{"NotReady", []history.Entry{look(1000, w1), look(5_000, cp1(unknown, ""))}, []string{"node-not-ready@w1 NotReady"}},
		{"waiting for its spec for 4 Talos minutes", []history.Entry{
			look(1000, w1), look(1000, cp1(nil, history.WaitingForEtcdSpec)), look(5000, cp1(nil, history.WaitingForEtcdSpec)),
		}, []string{"etcd-spec-missing@cp1 never writes"}},
		{"waiting for its spec for a Talos minute", []history.Entry{
			look(1000, w1), look(1000, cp1(nil, history.WaitingForEtcdSpec)), look(2000, cp1(nil, history.WaitingForEtcdSpec)),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history.History{Start: start, Scale: 60, Nodes: nodes, Entries: tc.entries}

			var got []string

			for _, d := range Diagnose(FromHistory(h, Options{})) {
				if d.Code == "node-not-ready" || d.Code == "etcd-spec-missing" {
					got = append(got, d.Code+"@"+d.Node+" "+d.Message)
				}
			}

			if len(got) != len(tc.want) {
				t.Fatalf("diagnoses %q, want %q", got, tc.want)
			}

			for i, w := range tc.want {
				code, word, _ := strings.Cut(w, " ")
				if !strings.HasPrefix(got[i], code+" ") || !strings.Contains(got[i], word) {
					t.Errorf("diagnosis %q, want %s with %q", got[i], code, word)
				}
			}
		})
	}
}
