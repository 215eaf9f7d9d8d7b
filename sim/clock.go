package sim

import (
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/talchaos/talchaos/fakes/talosapi"
	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/kubecp"
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

// etcdTick is the heartbeat interval embedded members run with at clk's scale.
func etcdTick(clk clock.Clock) time.Duration {
	return clk.WallAtLeast(etcdHeartbeat, etcdTickFloor)
}

// etcdBackoffFloor bounds from below the scaled first delay of the etcd
// clients' reconnect backoff (etcdConnectParams): a dial retried faster would
// only spin.
const etcdBackoffFloor = 10 * time.Millisecond

// etcdConnectParams are the reconnect settings of the nodes' etcd clients.
// Talos builds them with gRPC's defaults (internal/pkg/etcd/etcd.go NewClient
// sets no backoff; clientv3 neither): after a failed dial, the next one waits
// 1 s, then 1.6 times longer each time up to 2 minutes — timers of Talos's
// own process, in Talos time like its others, so scaled with the run. Left in
// wall time, a joiner whose first dial came before the first member served
// waited a real second (a Talos minute at 60x) to dial again: half of a join
// attempt's floored deadline as it then was (2 s), so that on a loaded
// machine the attempt ran out after etcd had applied its member add, leaving
// an unstarted learner Talos v1.12 cannot adopt (peer-url-exists,
// too-many-learners on a happy path).
// The connect timeout stays gRPC's 20 s of wall time: the calls' own
// deadlines bound a connect before it does.
func etcdConnectParams(clk clock.Clock) grpc.ConnectParams {
	b := backoff.DefaultConfig
	b.BaseDelay = clk.WallAtLeast(b.BaseDelay, etcdBackoffFloor)
	b.MaxDelay = clk.WallAtLeast(b.MaxDelay, etcdBackoffFloor)

	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: 20 * time.Second}
}

// reqTimeoutFixed is the part of etcd's request timeout
// (config.ServerConfig.ReqTimeout) that no scale shortens.
const reqTimeoutFixed = 5 * time.Second

// joinAddFloor is the clock floor of a join attempt's member add (addDeadline):
// the floor again from the add on, so an attempt lasts up to twice the floor.
const joinAddFloor = "etcd join attempt deadline counted again from its member add"

// ClockFloorsAt lists the Talos-time intervals the sim cannot scale all the way
// at scale, with what they last in Talos time instead; only those that bind.
func ClockFloorsAt(scale float64) []target.ClockFloor {
	clk := clock.New(scale)
	p := baseProfile()

	var out []target.ClockFloor

	add := func(what string, talos, floor time.Duration) {
		if f, ok := clk.Floored(what, talos, floor); ok {
			out = append(out, target.ClockFloor{What: f.What, Talos: f.Talos, Modelled: f.Modelled})
		}
	}

	add("etcd heartbeat interval", etcdHeartbeat, etcdTickFloor)
	add("etcd election timeout", etcdElection, electionFactor*etcdTickFloor)
	add("etcd health check timeout", p.HealthTimeout, etcdOpFloor)
	add("etcd join attempt deadline", p.JoinAttemptTimeout, joinAttemptFloor)
	add(joinAddFloor, p.JoinAttemptTimeout, joinAttemptFloor)
	add("etcd leave retry window", leaveWindow, leaveWindowFloor)
	// etcd's own constant, in wall time whatever the scale: a voter is
	// removed only once its leader has been connected this long (leave.go).
	add("etcd health interval before a voter's removal", etcdserver.HealthInterval, etcdserver.HealthInterval)
	// etcd's request timeout: reqTimeoutFixed plus two election timeouts,
	// which scale down to their floor; past it a proposal or a linearizable
	// read fails "etcdserver: request timed out".
	add("etcd request timeout", reqTimeoutFixed+2*etcdElection, reqTimeoutFixed+2*electionFactor*etcdTickFloor)
	add("etcd client dial timeout", p.EtcdDialTimeout, minTimeout)
	add("apid connect timeout to a peer node", talosapi.PeerConnectTimeout, talosapi.ConnectFloor)
	add("etcd client reconnect backoff (first)", backoff.DefaultConfig.BaseDelay, etcdBackoffFloor)

	return out
}

// ClockFloors implements target.ClockFloorer.
func (Target) ClockFloors(sc *scenario.Scenario) []target.ClockFloor {
	out := ClockFloorsAt(Scale(sc))

	// A shared IP is served with the operator's addresses (vip.go).
	if sc.Cluster.Network != nil {
		if f, ok := clock.New(Scale(sc)).Floored("shared IP election session TTL", vipSessionTTL, vipTTLFloor); ok {
			out = append(out, target.ClockFloor{What: f.What, Talos: f.Talos, Modelled: f.Modelled})
		}
	}

	out = append(out, UpgradeClockFloors(Scale(sc), sc)...)

	if sc.Cluster.Kubernetes {
		out = append(out, KubernetesClockFloors(Scale(sc))...)
	}

	return out
}

// UpgradeClockFloors are the floors of a run with a rolling upgrade at
// scale: the upgrade mutex's session lease (fakes/talosapi/upgrade.go).
func UpgradeClockFloors(scale float64, sc *scenario.Scenario) []target.ClockFloor {
	if sc.Orchestrator.UpgradeTo == "" {
		return nil
	}

	f, ok := clock.New(scale).Floored("etcd upgrade mutex session TTL", talosapi.UpgradeMutexTTL, talosapi.UpgradeMutexTTLFloor)
	if !ok {
		return nil
	}

	return []target.ClockFloor{{What: f.What, Talos: f.Talos, Modelled: f.Modelled}}
}

// KubernetesClockFloors are the Kubernetes intervals of a run with
// Kubernetes: its components run on real time, as etcd's do, so each lasts
// scale times longer in Talos time than on a real cluster.
func KubernetesClockFloors(scale float64) []target.ClockFloor {
	if scale <= 1 {
		return nil
	}

	c := clock.New(scale)

	// A real-time interval d lasts d of wall time, c.Talos(d) of Talos time.
	real := func(what string, d time.Duration) target.ClockFloor {
		return target.ClockFloor{What: what, Talos: d, Modelled: c.Talos(d)}
	}

	return []target.ClockFloor{
		real("kube-apiserver endpoint reconcile interval", kubeEndpointInterval),
		real("kube-apiserver endpoint lease TTL", kubeEndpointTTL),
		real("kubelet restart back-off (first)", kubeBackoffInitial),
		real("kubelet restart back-off (most)", kubeBackoffMax),
		real("kubelet node lease duration", kubecp.KubeletLeaseSeconds*time.Second),
		real("kube-controller-manager node monitor grace period (default)", kubeNodeMonitorGrace),
	}
}
