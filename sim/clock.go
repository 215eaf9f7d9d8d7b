package sim

import (
	"time"

	"github.com/talchaos/talchaos/fakes/talosapi"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// Talos leaves etcd's raft timers at etcd's defaults: a 100 ms heartbeat and
// a 1 s election timeout (services/etcd.go argsForInit/argsForControlPlane
// set neither --heartbeat-interval nor --election-timeout). The sim scales
// them with the run, down to etcdTickFloor: raft at real speed over TLS on
// a loaded 2-core machine elects spurious leaders below it.
const (
	etcdHeartbeat  = 100 * time.Millisecond
	etcdElection   = 10 * etcdHeartbeat
	etcdTickFloor  = 50 * time.Millisecond
	electionFactor = etcdElection / etcdHeartbeat
)

// etcdTick is the heartbeat interval embedded members run with at scale.
func etcdTick(scale float64) time.Duration {
	return max(time.Duration(float64(etcdHeartbeat)/scale), etcdTickFloor)
}

// ClockFloorsAt lists the Talos-time intervals the sim cannot scale all the way
// at scale, with what they last in Talos time instead; only those that bind.
func ClockFloorsAt(scale float64) []target.ClockFloor {
	talos := func(wall time.Duration) time.Duration { return time.Duration(float64(wall) * scale) }
	p := baseProfile()

	var out []target.ClockFloor

	add := func(what string, real, wall time.Duration) {
		if modelled := talos(wall); modelled > real {
			out = append(out, target.ClockFloor{What: what, Talos: real, Modelled: modelled.Round(time.Millisecond)})
		}
	}

	tick := etcdTick(scale)
	add("etcd heartbeat interval", etcdHeartbeat, tick)
	add("etcd election timeout", etcdElection, electionFactor*tick)
	add("etcd health check timeout", p.HealthTimeout, max(time.Duration(float64(p.HealthTimeout)/scale), etcdOpFloor))
	add("etcd join attempt deadline", p.JoinAttemptTimeout, max(time.Duration(float64(p.JoinAttemptTimeout)/scale), joinAttemptFloor))
	add("etcd client dial timeout", p.EtcdDialTimeout, max(time.Duration(float64(p.EtcdDialTimeout)/scale), minTimeout))
	add("apid connect timeout to a peer node", 20*time.Second, max(time.Duration(float64(20*time.Second)/scale), talosapi.ConnectFloor))

	return out
}

// ClockFloors implements target.ClockFloorer.
func (Target) ClockFloors(sc *scenario.Scenario) []target.ClockFloor { return ClockFloorsAt(Scale(sc)) }
