package judge

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
)

// etcd's service going Failed is seen in a look at the node or, when the
// looks missed it (an orchestrator rebooted the node between two polls), in
// the node's machined log; a Failed that a stop caused is no failure.
func TestEtcdFailed(t *testing.T) {
	nodes := []history.Node{{Name: "cp3", Role: "controlplane", Address: "127.0.9.4"}}
	preparing := &history.NodeObservation{Name: "cp3", Address: "127.0.9.4", Role: "controlplane", Mode: history.ModeConfigured, Etcd: &history.Service{State: "Preparing"}}
	failed := *preparing
	failed.Etcd = &history.Service{State: "Failed", Message: "Failed to run pre stage: timeout"}
	line := func(text string) history.Entry {
		return history.Entry{WallMs: 20, Node: "cp3", Log: &history.Log{Source: history.LogMachined, Text: text}}
	}
	look := func(ms int64, n *history.NodeObservation) history.Entry {
		return history.Entry{WallMs: ms, Node: "cp3", Observed: n}
	}

	for _, tc := range []struct {
		name    string
		entries []history.Entry
		want    string // the diagnosis's evidence, "" for none
	}{
		{"seen in a look", []history.Entry{look(10, preparing), look(30, &failed), look(40, preparing)},
			"etcd Failed: Failed to run pre stage: timeout (at 2s)"},
		{"only in the log", []history.Entry{look(10, preparing), line("service[etcd](Failed): Failed to run pre stage: timeout"), look(40, preparing)},
			"etcd Failed: Failed to run pre stage: timeout (at 1s)"},
		{"stopped", []history.Entry{look(10, preparing), line("service[etcd](Failed): Condition failed: context canceled"), look(40, preparing)}, ""},
		{"another service", []history.Entry{look(10, preparing), line("service[kubelet](Failed): Failed to run pre stage: timeout"), look(40, preparing)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history.History{Start: time.Now(), Scale: 60, Nodes: nodes, Entries: tc.entries}

			var got string

			for _, d := range Diagnose(FromHistory(h, Options{})) {
				if d.Code == "etcd-failed" && d.Node == "cp3" {
					got = d.Evidence
				}
			}

			if got != tc.want {
				t.Errorf("etcd-failed evidence %q, want %q", got, tc.want)
			}
		})
	}
}
