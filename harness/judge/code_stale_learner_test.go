package judge

import (
	"testing"

	"github.com/talchaos/talchaos/harness/history"
)

// A learner that never started is its node's by its peer URL, on the node's
// main address or on a further one etcd advertises (advertisedSubnets, IPv6).
func TestStaleLearnerNode(t *testing.T) {
	for _, tc := range []struct {
		name, peer, want string
	}{
		{"main address", cp3, "cp3"},
		{"further IPv6 address", "[fd00::13]", "cp3"},
		{"no node's", "10.9.9.9", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obs(func(o *history.Observation) {
				converged(o)

				o.Nodes["cp3"].Addresses = []string{"fd00::13"}
				ms := []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false), member(3, "", tc.peer, true)}

				for _, n := range o.Nodes {
					n.Members = ms
				}
			})

			ds := staleLearner(&Evidence{Final: o})
			if len(ds) != 1 || ds[0].Node != tc.want {
				t.Fatalf("diagnoses %+v, want one on %q", ds, tc.want)
			}
		})
	}
}
