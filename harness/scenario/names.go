package scenario

import (
	"strconv"
	"strings"
	"time"
)

// DefaultEtcdImagePull is the etcd image pull time of a node not listed in
// cluster.nodes (Parse fills it in for listed nodes).
const DefaultEtcdImagePull = 2 * time.Second

// DefaultWithin bounds a run when expect.within is not set.
const DefaultWithin = 30 * time.Minute

// DefaultSettle is how long a run keeps observing at least after the
// orchestrator returns when expect.settle is not set: more than Talos's 20 s
// etcd health check period, so a member promoted a moment ago is seen healthy.
const DefaultSettle = 30 * time.Second

// DefaultStable is how long the judged state must hold when expect.stable is
// not set: more than one etcd health check period.
const DefaultStable = 30 * time.Second

// SettleBound is how much longer than expect.settle a run waits for its state
// to hold still before it is judged as it is (within expect.within).
const SettleBound = 5 * time.Minute

// DefaultValueBytes is the workload value size when writes are enabled without one.
const DefaultValueBytes = 256

// Bounds on a scenario. Each node is a real etcd member and Talos API on the
// test machine, and every number ends up sizing memory, goroutines or waits:
// a bound keeps a typo (an extra zero) from eating the machine.
const (
	// MaxControlPlanes bounds cluster.controlPlanes (etcd clusters beyond 7
	// members are not a Talos configuration anyone runs).
	MaxControlPlanes = 9
	// MaxWorkers bounds cluster.workers.
	MaxWorkers = 100
	// MaxTimeScale bounds timeScale: beyond it Talos timers shrink below the
	// scheduling noise of the test machine.
	MaxTimeScale = 10000
	// MaxDuration bounds every Talos-time duration of a scenario (triggers,
	// windows, boot delays, the run itself).
	MaxDuration = 24 * time.Hour
	// MaxNameLen bounds the scenario's and the faults' names.
	MaxNameLen = 63
	// MaxDescription bounds the description.
	MaxDescription = 16 << 10
	// MaxLearners bounds cluster.etcd.maxLearners.
	MaxLearners = 16
	// MaxSnapshotEntries bounds snapshotCount and snapshotCatchUpEntries.
	MaxSnapshotEntries = 10_000_000
	// MaxWritesPerSecond bounds the workload's write rate.
	MaxWritesPerSecond = 10_000
	// MaxValueBytes bounds the workload's value size: etcd refuses requests
	// over 1.5 MiB.
	MaxValueBytes = 1 << 20
	// MaxFaults bounds the faults list.
	MaxFaults = 200
	// MaxCount bounds counts (a trigger's k-th refusal, an API fault's calls).
	MaxCount = 10_000
	// MaxListItems bounds the other lists of a scenario.
	MaxListItems = 256
)

// Orchestrators are the bootstrap strategies orchestrator.name can pick.
var Orchestrators = []string{"resilient", "naive", "exec"}

// EndpointCluster is orchestrator.endpoint's one value: the talosconfig
// client's calls go through cluster.network.endpoint.
const EndpointCluster = "cluster"

// NodeNames lists the cluster's nodes: control planes cp1..cpN, then workers w1..wM.
func (c Cluster) NodeNames() []string {
	names := make([]string, 0, max(c.ControlPlanes, 0)+max(c.Workers, 0))
	for i := 1; i <= c.ControlPlanes; i++ {
		names = append(names, "cp"+strconv.Itoa(i))
	}

	for i := 1; i <= c.Workers; i++ {
		names = append(names, "w"+strconv.Itoa(i))
	}

	return names
}

// IsControlPlane reports whether name is a control-plane node name (cp1, cp2, ...).
func IsControlPlane(name string) bool {
	n, ok := strings.CutPrefix(name, "cp")

	return ok && isIndex(n)
}

// isIndex reports whether s is a positive decimal without leading zeros, the form of
// the number in a node name.
func isIndex(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}

	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}

	return true
}
