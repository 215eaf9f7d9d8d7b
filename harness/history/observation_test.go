package history

import (
	"testing"
	"time"
)

// TestMemberToNode: a member and its node find each other the same way both
// ways, by what etcd says of itself, then peer URL, then name: with a node
// named as another's hostname and two nodes given one hostname.
func TestMemberToNode(t *testing.T) {
	m1 := Member{ID: 1, Hostname: "cp3", PeerURLs: []string{"https://10.5.0.2:2380"}}
	m2 := Member{ID: 2, Hostname: "web", PeerURLs: []string{"https://[fd00::3]:2380"}}
	moved := Member{ID: 3, Hostname: "db", PeerURLs: []string{"https://10.9.9.9:2380"}}
	unstarted := Member{ID: 4, PeerURLs: []string{"https://10.5.0.5:2380"}, IsLearner: true}

	for _, tc := range []struct {
		name  string
		nodes []*NodeObservation
		m     Member
		want  string
	}{
		{"named as another's hostname, by peer URL", []*NodeObservation{
			{Name: "cp2", Address: "10.5.0.2", Hostname: "cp3"},
			{Name: "cp3", Address: "10.5.0.3"},
		}, m1, "cp2"},
		{"by a further IPv6 address", []*NodeObservation{
			{Name: "cp1", Address: "10.5.0.1", Hostname: "web"},
			{Name: "cp2", Address: "10.5.0.12", Hostname: "web", Addresses: []string{"fd00::3"}},
		}, m2, "cp2"},
		{"its own status first", []*NodeObservation{
			{Name: "cp1", Address: "10.5.0.2"},
			{Name: "cp2", Address: "10.5.0.7", Status: &EtcdStatus{MemberID: 1}},
		}, m1, "cp2"},
		{"moved: by its hostname", []*NodeObservation{
			{Name: "cp1", Address: "10.5.0.1"},
			{Name: "cp2", Address: "10.5.0.12", Hostname: "db"},
		}, moved, "cp2"},
		{"not started: by peer URL", []*NodeObservation{
			{Name: "cp5", Address: "10.5.0.5"},
		}, unstarted, "cp5"},
		{"no node", []*NodeObservation{{Name: "cp1", Address: "10.5.0.1"}}, moved, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := make([]string, 0, len(tc.nodes))
			for _, n := range tc.nodes {
				names = append(names, n.Name)
			}

			o := NewObservation(time.Second, names)
			for _, n := range tc.nodes {
				o.Nodes[n.Name] = n
			}

			if got := o.NodeOf(tc.m); got != tc.want {
				t.Fatalf("NodeOf = %q, want %q", got, tc.want)
			}

			if tc.want == "" {
				return
			}

			c := Cluster{Members: []Member{m1, m2, moved, unstarted}}
			if got, ok := c.MemberOf(o.Nodes[tc.want]); !ok || got.ID != tc.m.ID {
				t.Fatalf("MemberOf(%s) = %v %v, want member %d", tc.want, got, ok, tc.m.ID)
			}
		})
	}
}
