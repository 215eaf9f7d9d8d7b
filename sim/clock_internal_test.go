package sim

import (
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
)

// etcd's raft timers follow the run's scale down to the floor, and the floors
// a run reports are exactly those that bind (clock.go; TALOS-FIDELITY "Time").
func TestClockScalingAndFloors(t *testing.T) {
	for _, tc := range []struct {
		scale          float64
		tick, election time.Duration
		floors         map[string]time.Duration // what → modelled Talos time
	}{
		{scale: 1, tick: 100 * time.Millisecond, election: time.Second, floors: map[string]time.Duration{}},
		{scale: 2, tick: 50 * time.Millisecond, election: 500 * time.Millisecond, floors: map[string]time.Duration{}},
		{scale: 10, tick: 50 * time.Millisecond, election: 500 * time.Millisecond, floors: map[string]time.Duration{
			"etcd heartbeat interval":   500 * time.Millisecond,
			"etcd election timeout":     5 * time.Second,
			"etcd health check timeout": 10 * etcdOpFloor,
		}},
		{scale: 60, tick: 50 * time.Millisecond, election: 500 * time.Millisecond, floors: map[string]time.Duration{
			"etcd heartbeat interval":             3 * time.Second,
			"etcd election timeout":               30 * time.Second,
			"etcd health check timeout":           60 * etcdOpFloor,
			"etcd client dial timeout":            9 * time.Second,
			"apid connect timeout to a peer node": 120 * time.Second,
		}},
	} {
		// The join attempt's floor is higher under the race detector.
		if join := time.Duration(tc.scale * float64(joinAttemptFloor)); join > 30*time.Second {
			tc.floors["etcd join attempt deadline"] = join
		}

		tick := etcdTick(clock.New(tc.scale))
		if tick != tc.tick || electionFactor*tick != tc.election {
			t.Errorf("scale %g: tick %s election %s, want %s %s", tc.scale, tick, electionFactor*tick, tc.tick, tc.election)
		}

		got := map[string]time.Duration{}
		for _, f := range ClockFloorsAt(tc.scale) {
			got[f.What] = f.Modelled

			if f.Modelled <= f.Talos {
				t.Errorf("scale %g: %s listed as a floor but lasts %s ≤ %s", tc.scale, f.What, f.Modelled, f.Talos)
			}
		}

		if len(got) != len(tc.floors) {
			t.Errorf("scale %g: floors %v, want %v", tc.scale, got, tc.floors)
		}

		for what, want := range tc.floors {
			if got[what] != want {
				t.Errorf("scale %g: %s lasts %s, want %s", tc.scale, what, got[what], want)
			}
		}
	}
}
