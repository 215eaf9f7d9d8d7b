package chaos

import (
	"context"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/check"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

type fakeTarget struct{ caps []target.Capability }

func (f fakeTarget) Name() string                      { return "fake" }
func (f fakeTarget) Capabilities() []target.Capability { return f.caps }
func (f fakeTarget) Provision(context.Context, *scenario.Scenario, target.Options) (target.Cluster, error) {
	return nil, nil
}

func parse(t *testing.T, faults string) *scenario.Scenario {
	t.Helper()

	sc, err := scenario.Parse("s.yaml", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: s\ncluster:\n  controlPlanes: 3\nfaults:\n"+faults))
	if err != nil {
		t.Fatal(err)
	}

	return sc
}

func TestPlan(t *testing.T) {
	network := fakeTarget{caps: []target.Capability{target.Network}}

	for _, tc := range []struct {
		name, faults string
		tgt          target.Target
		wantErr      string
	}{
		{"blackhole", "  - kind: blackhole\n    node: cp2\n    port: etcd-peer\n    at: 1m\n", network, ""},
		{"unknown kind", "  - kind: meteor\n    node: cp2\n    at: 1m\n", network, `s.yaml:7: faults[0].kind: unknown fault kind "meteor"`},
		{"missing port", "  - kind: blackhole\n    node: cp2\n    at: 1m\n", network, "faults[0].port: blackhole needs a port"},
		{"bandwidth without rate", "  - kind: bandwidth\n    node: cp2\n    port: etcd-peer\n    at: 1m\n", network, "faults[0].rateKBps"},
		{"unsupported by target", "  - kind: latency\n    node: cp2\n    port: etcd-peer\n    latency: 50ms\n    at: 1m\n", fakeTarget{}, `cannot inject "latency" faults`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(parse(t, tc.faults), tc.tgt, 1)

			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestHolds(t *testing.T) {
	o := check.NewObservation(0, []string{"cp1", "cp2", "cp3"})
	members := []check.Member{
		{ID: 1, Hostname: "cp1", PeerURLs: []string{"https://127.0.9.2:2380"}},
		{ID: 2, Hostname: "", PeerURLs: []string{"https://127.0.9.3:2380"}, IsLearner: true},
	}
	o.Nodes["cp1"] = &check.NodeObservation{Name: "cp1", Address: "127.0.9.2", Mode: check.ModeConfigured, Etcd: &check.Service{State: "Running"}, Members: members[:1]}
	o.Nodes["cp2"] = &check.NodeObservation{Name: "cp2", Address: "127.0.9.3", Mode: check.ModeConfigured, Etcd: &check.Service{State: "Preparing"}}
	o.Nodes["cp3"] = &check.NodeObservation{Name: "cp3", Address: "127.0.9.4", Mode: check.ModeMaintenance}

	// cp1 saw itself alone first; a later view includes the new learner.
	o.Nodes["cp1"].Members = members

	o.Nodes["cp2"].PromoteRefusals = 2

	for _, tc := range []struct {
		node, state string
		count       int
		want        bool
	}{
		{"cp1", "voter", 0, true},
		{"cp1", "etcd-running", 0, true},
		{"cp2", "learner", 0, true}, // an unstarted learner is found by its peer URL
		{"cp2", "member", 0, true},
		{"cp2", "voter", 0, false},
		{"cp2", "left-maintenance", 0, true},
		{"cp3", "left-maintenance", 0, false},
		{"cp3", "member", 0, false},
		{"cp1", "bootstrapped", 0, false}, // two members now
		{"cp2", "promote-refused", 0, true},
		{"cp2", "promote-refused", 2, true},
		{"cp2", "promote-refused", 3, false},
		{"cp1", "promote-refused", 0, false},
	} {
		if got := Holds(o, scenario.When{Node: tc.node, State: tc.state, Count: tc.count}); got != tc.want {
			t.Errorf("Holds(%s, %s, %d) = %v, want %v", tc.node, tc.state, tc.count, got, tc.want)
		}
	}
}
