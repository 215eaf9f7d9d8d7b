package chaos

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
)

// bootstrapped holds for a node's own started member alone in its cluster,
// whatever the node's config names its hostname.
func TestBootstrapped(t *testing.T) {
	own := history.Member{ID: 7, Hostname: "site-ctl-11", PeerURLs: []string{"https://10.5.0.2:2380"}}
	other := history.Member{ID: 8, Hostname: "cp2", PeerURLs: []string{"https://10.5.0.9:2380"}}

	for _, tc := range []struct {
		name     string
		hostname string
		members  []history.Member
		want     bool
	}{
		{"named by its hostname", "site-ctl-11", []history.Member{own}, true},
		{"an automatic hostname: by its peer URL", "", []history.Member{own}, true},
		{"another node's member", "", []history.Member{other}, false},
		{"not started yet", "", []history.Member{{ID: 7, PeerURLs: own.PeerURLs}}, false},
		{"a learner", "site-ctl-11", []history.Member{{ID: 7, Hostname: "site-ctl-11", PeerURLs: own.PeerURLs, IsLearner: true}}, false},
		{"two members", "site-ctl-11", []history.Member{own, other}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := history.NewObservation(time.Second, []string{"cp1"})
			o.Nodes["cp1"] = &history.NodeObservation{Name: "cp1", Address: "10.5.0.2", Hostname: tc.hostname, Members: tc.members}

			if got := (Bootstrapped{}).Holds(View{Obs: o}, "cp1", 0); got != tc.want {
				t.Errorf("bootstrapped = %t, want %t", got, tc.want)
			}
		})
	}
}
