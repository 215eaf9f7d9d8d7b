package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// etcdLog is a line of node's etcd log the observer kept at ms.
func etcdLog(ms int64, node, level, text string) history.Entry {
	return history.Entry{WallMs: ms, Node: node, Log: &history.Log{Source: history.LogEtcd, Level: level, Text: text}}
}

func TestSlowDiskDiagnosis(t *testing.T) {
	ok := running(true, "")
	voter := []history.Member{member(1, "cp1", cp1, false)}
	slow := func(took string) string {
		return `{"level":"warn","ts":1795671148.9974911,"msg":"slow fdatasync","took":"` + took + `","expected-duration":"1s"}`
	}

	for _, tc := range []struct {
		name string
		h    history.History
		want map[string]string
	}{
		{
			name: "etcd's WAL logged slow fdatasync",
			h: threeNodes(60,
				etcdLog(1000, "cp2", "warn", slow("2.003s")),
				etcdLog(3000, "cp2", "warn", slow("2.5s")),
				etcdLog(3100, "cp1", "error", `{"level":"error","msg":"rejecting promote learner: learner is not ready","learner-ready-percent":0.5}`),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
			want: map[string]string{"cp2": `cp2 etcd: slow fdatasync (expected-duration 1s, took 2.003s); 2 time(s), first at 1m0s Talos (1.0s wall), last at 3m0s Talos (3.0s wall)`},
		},
		{
			name: "no slow sync: other etcd lines say nothing of the disk",
			h: threeNodes(60,
				etcdLog(3100, "cp1", "error", `{"level":"error","msg":"rejecting promote learner: learner is not ready","learner-ready-percent":0.5}`),
				observed(5000, "cp1", history.ModeConfigured, ok, voter, true)),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}

			c, _ := LookupCode("slow-disk")
			for _, d := range c.Diagnose(FromHistory(tc.h, Options{})) {
				got[d.Node] = d.Evidence

				if tc.want[d.Node] != "" && !strings.Contains(d.Message, "up to 2.5s") {
					t.Errorf("message %q, want the worst sync (2.5s)", d.Message)
				}
			}

			if len(got) != len(tc.want) {
				t.Fatalf("slow-disk on %v, want on %v", got, tc.want)
			}

			for node, text := range tc.want {
				if got[node] != text {
					t.Errorf("evidence %q, want %q", got[node], text)
				}
			}
		})
	}
}
