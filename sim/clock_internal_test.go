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
		{scale: 2, tick: 50 * time.Millisecond, election: 500 * time.Millisecond, floors: map[string]time.Duration{
			"etcd request timeout":                          12 * time.Second,
			"etcd health interval before a voter's removal": 10 * time.Second,
		}},
		{scale: 10, tick: 50 * time.Millisecond, election: 500 * time.Millisecond, floors: map[string]time.Duration{
			"etcd request timeout":                          60 * time.Second,
			"etcd health interval before a voter's removal": 50 * time.Second,
			"etcd heartbeat interval":                       500 * time.Millisecond,
			"etcd election timeout":                         5 * time.Second,
			"etcd health check timeout":                     10 * etcdOpFloor,
		}},
		{scale: 60, tick: 50 * time.Millisecond, election: 500 * time.Millisecond, floors: map[string]time.Duration{
			"etcd request timeout":                          6 * time.Minute,
			"etcd heartbeat interval":                       3 * time.Second,
			"etcd election timeout":                         30 * time.Second,
			"etcd health check timeout":                     60 * etcdOpFloor,
			"etcd client dial timeout":                      9 * time.Second,
			"apid connect timeout to a peer node":           120 * time.Second,
			"etcd leave retry window":                       15 * time.Minute,
			"etcd health interval before a voter's removal": 5 * time.Minute,
		}},
		// Beyond 100x the etcd clients' first reconnect delay binds too.
		{scale: 200, tick: 50 * time.Millisecond, election: 500 * time.Millisecond, floors: map[string]time.Duration{
			"etcd request timeout":                          20 * time.Minute,
			"etcd heartbeat interval":                       10 * time.Second,
			"etcd election timeout":                         100 * time.Second,
			"etcd health check timeout":                     200 * etcdOpFloor,
			"etcd client dial timeout":                      30 * time.Second,
			"apid connect timeout to a peer node":           400 * time.Second,
			"etcd client reconnect backoff (first)":         2 * time.Second,
			"etcd leave retry window":                       50 * time.Minute,
			"etcd health interval before a voter's removal": 1000 * time.Second,
		}},
	} {
		// The join attempt's floor is higher under the race detector.
		if join := time.Duration(tc.scale * float64(joinAttemptFloor)); join > 30*time.Second {
			tc.floors["etcd join attempt deadline"] = join
			tc.floors[joinAddFloor] = join
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

// The etcd clients reconnect on Talos time: gRPC's default backoff (the one
// Talos leaves) scaled with the run, down to its floor; the connect timeout
// stays gRPC's default.
func TestEtcdConnectParams(t *testing.T) {
	for _, tc := range []struct {
		scale     float64
		base, max time.Duration
	}{
		{scale: 1, base: time.Second, max: 2 * time.Minute},
		{scale: 60, base: time.Second / 60, max: 2 * time.Second},
		{scale: 1000, base: etcdBackoffFloor, max: 120 * time.Millisecond},
	} {
		p := etcdConnectParams(clock.New(tc.scale))
		if p.Backoff.BaseDelay != tc.base || p.Backoff.MaxDelay != tc.max || p.Backoff.Multiplier != 1.6 || p.MinConnectTimeout != 20*time.Second {
			t.Errorf("scale %g: %+v, want a first delay of %s growing 1.6 times to %s, 20 s to connect", tc.scale, p, tc.base, tc.max)
		}
	}
}

// Kubernetes's components run on real time: at a scale above 1 each of their
// intervals lasts scale times longer in Talos time, and none is a floor at 1.
func TestKubernetesClockFloors(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		want  time.Duration // the kubelet's node lease (40 s) in Talos time
	}{
		{scale: 1},
		{scale: 2, want: 80 * time.Second},
		{scale: 60, want: 40 * time.Minute},
	} {
		var got time.Duration

		for _, f := range KubernetesClockFloors(tc.scale) {
			if f.What == "kubelet node lease duration" {
				got = f.Modelled
			}
		}

		if got != tc.want {
			t.Errorf("scale %g: kubelet node lease modelled as %s, want %s", tc.scale, got, tc.want)
		}
	}
}

// A join attempt's member add gets the floor again when less of the attempt
// is left, never less than the attempt's own end.
func TestAddDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	attempt := start.Add(joinAttemptFloor)

	for _, tc := range []struct {
		name     string
		sentAt   time.Duration // after the attempt's start
		floor    time.Duration // zero: the attempt is not floored
		deadline time.Duration // after the attempt's start
	}{
		{name: "add sent at once: the attempt's end", sentAt: 0, floor: joinAttemptFloor, deadline: joinAttemptFloor},
		{name: "add sent halfway: the floor again", sentAt: joinAttemptFloor / 2, floor: joinAttemptFloor, deadline: joinAttemptFloor * 3 / 2},
		{name: "add sent at the end: the floor again", sentAt: joinAttemptFloor, floor: joinAttemptFloor, deadline: 2 * joinAttemptFloor},
		{name: "not floored: the attempt's end", sentAt: joinAttemptFloor / 2, deadline: joinAttemptFloor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := addDeadline(attempt, start.Add(tc.sentAt), tc.floor).Sub(start); got != tc.deadline {
				t.Errorf("add deadline %s after the start, want %s", got, tc.deadline)
			}
		})
	}
}
