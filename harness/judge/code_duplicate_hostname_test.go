package judge

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
)

// Two control planes of one hostname: the one whose member the other's join
// removed is diagnosed, its member found by peer URL; distinct hostnames, or
// both still members, are not.
func TestDuplicateHostname(t *testing.T) {
	named := func(cp2Host, cp3Host string, members ...history.Member) *history.Observation {
		return obs(func(o *history.Observation) {
			o.Nodes["cp2"].Hostname, o.Nodes["cp3"].Hostname = cp2Host, cp3Host

			for _, n := range o.Nodes {
				n.Etcd = running(true, "")
				n.Members = members
			}

			o.Nodes["cp2"].Etcd = &history.Service{State: "Waiting", Message: "Error running Containerd(etcd), going to restart forever"}
		})
	}

	for _, tc := range []struct {
		name string
		o    *history.Observation
		want map[string]string // node: evidence
	}{
		{"cp3's join removed cp2's member", named("solcp02", "solcp02", member(1, "cp1", cp1, false), member(3, "solcp02", cp3, false)),
			map[string]string{"cp2": `control planes cp2, cp3 have the hostname "solcp02"; etcd's member "solcp02" is cp3's (peer URLs https://127.0.9.4:2380), none is cp2's; its etcd service is Waiting`}},
		{"neither a member", named("solcp02", "solcp02", member(1, "cp1", cp1, false)),
			map[string]string{
				"cp2": `control planes cp2, cp3 have the hostname "solcp02"; no member is cp2's; its etcd service is Waiting`,
				"cp3": `control planes cp3, cp2 have the hostname "solcp02"; no member is cp3's; its etcd service is Running`,
			}},
		{"a node named as another's hostname", named("cp3", "", member(1, "cp1", cp1, false), member(3, "cp3", cp3, false)),
			map[string]string{"cp2": `control planes cp2, cp3 have the hostname "cp3"; etcd's member "cp3" is cp3's (peer URLs https://127.0.9.4:2380), none is cp2's; its etcd service is Waiting`}},
		{"distinct hostnames", named("solcp02", "solcp03", member(1, "cp1", cp1, false), member(3, "solcp03", cp3, false)), nil},
		{"both members", named("solcp02", "solcp02", member(1, "cp1", cp1, false), member(2, "solcp02", cp2, false), member(3, "solcp02", cp3, true)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history.History{Start: time.Now(), Scale: 60}
			for _, n := range tc.o.Ordered() {
				h.Nodes = append(h.Nodes, history.Node{Name: n.Name, Role: n.Role, Address: n.Address})
				h.Entries = append(h.Entries, history.Entry{WallMs: 10000, Node: n.Name, Observed: n, Final: true})
			}

			got := map[string]string{}

			for _, d := range Diagnose(FromHistory(h, Options{})) {
				if d.Code == "duplicate-hostname" {
					got[d.Node] = d.Evidence
				}
			}

			if len(got) != len(tc.want) {
				t.Fatalf("diagnosed %v, want %v", got, tc.want)
			}

			for node, want := range tc.want {
				if got[node] != want {
					t.Errorf("%s: evidence\n%s\nwant\n%s", node, got[node], want)
				}
			}
		})
	}
}
