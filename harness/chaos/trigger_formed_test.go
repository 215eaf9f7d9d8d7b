package chaos

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

// formed holds once every control plane is a voter of the node's cluster;
// a worker need not be a member.
func TestFormed(t *testing.T) {
	voter := func(id uint64, name string) history.Member {
		return history.Member{ID: id, Hostname: name, PeerURLs: []string{"https://10.5.0." + name[2:] + ":2380"}}
	}
	learner := func(id uint64, name string) history.Member {
		m := voter(id, name)
		m.IsLearner = true

		return m
	}
	three := []history.Member{voter(1, "cp1"), voter(2, "cp2"), voter(3, "cp3")}

	for _, tc := range []struct {
		name    string
		members []history.Member
		want    bool
	}{
		{"every control plane a voter", three, true},
		{"one still a learner", []history.Member{voter(1, "cp1"), voter(2, "cp2"), learner(3, "cp3")}, false},
		{"one not joined yet", three[:2], false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := history.NewObservation(time.Second, []string{"cp1", "cp2", "cp3", "w1"})
			for i, name := range []string{"cp1", "cp2", "cp3"} {
				o.Nodes[name] = &history.NodeObservation{Name: name, Address: "10.5.0." + name[2:], Role: target.ControlPlane, Members: tc.members,
					Status: &history.EtcdStatus{MemberID: uint64(i + 1)}}
			}

			o.Nodes["w1"] = &history.NodeObservation{Name: "w1", Address: "10.5.0.9", Role: target.Worker}

			if got := (Formed{}).Holds(View{Obs: o}, "cp1", 0); got != tc.want {
				t.Errorf("formed = %t, want %t", got, tc.want)
			}
		})
	}
}
