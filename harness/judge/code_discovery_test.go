package judge

import (
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// helloLine is what a node cut off from discovery.talos.dev logs (talos
// #10136, as machined's console prints it).
const helloLine = `hello failed {"component": "controller-runtime", "controller": "cluster.DiscoveryServiceController", ` +
	`"error": "rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial tcp 172.174.35.21:443: connect: no route to host\"", ` +
	`"endpoint": "discovery.talos.dev:443"}`

func machinedLine(ms int64, node, text string) history.Entry {
	return history.Entry{WallMs: ms, Node: node, Log: &history.Log{Source: history.LogMachined, Text: text}}
}

func TestDiscoveryUnreachable(t *testing.T) {
	voters := []history.Member{member(1, "cp1", cp1, false), member(3, "cp3", cp3, false)}
	ok := running(true, "")

	for _, tc := range []struct {
		name string
		h    history.History
		// want: the evidence of cp2's diagnosis holds it; "" for none.
		want string
	}{
		{
			name: "cut off to the end, its etcd joining",
			h: threeNodes(60,
				machinedLine(100, "cp2", helloLine), machinedLine(1500, "cp2", "retrying error: timeout"),
				machinedLine(4900, "cp2", helloLine),
				observed(5000, "cp1", history.ModeConfigured, ok, voters, true),
				observed(5000, "cp2", history.ModeConfigured, preparing, nil, true),
				observed(5000, "cp3", history.ModeConfigured, ok, voters, true)),
			want: `2 "hello failed" line(s) in its machined log from 6s Talos (0.1s wall) to 4m54s Talos (4.9s wall), the last: ` + helloLine +
				`; service etcd: Preparing ("Running pre state") at the end; its join's last new error at 1m30s Talos (1.5s wall): retrying error: timeout`,
		},
		{
			name: "the service answered again minutes before the end",
			h: threeNodes(60,
				machinedLine(100, "cp2", helloLine),
				observed(5000, "cp1", history.ModeConfigured, ok, voters, true),
				observed(5000, "cp2", history.ModeConfigured, preparing, nil, true)),
		},
		{
			name: "cut off, but its etcd runs (it had discovered a voter)",
			h: threeNodes(60,
				machinedLine(4900, "cp2", helloLine),
				observed(5000, "cp2", history.ModeConfigured, ok, voters, true)),
		},
		{
			name: "joining with no hello failed (a partial list, a dead endpoint)",
			h: threeNodes(60,
				machinedLine(4900, "cp2", "retrying error: timeout"),
				observed(5000, "cp2", history.ModeConfigured, preparing, nil, true)),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := codeFunc("discovery-unreachable")(FromHistory(tc.h, Options{}))

			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("diagnosed %v, want none", got)
			case tc.want == "":
			case len(got) != 1 || got[0].Node != "cp2":
				t.Fatalf("diagnosed %v, want cp2", got)
			case !strings.Contains(got[0].Evidence, tc.want):
				t.Errorf("evidence:\n%s\nwant:\n%s", got[0].Evidence, tc.want)
			}
		})
	}
}
