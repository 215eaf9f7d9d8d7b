package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
)

// SlowDisk makes a node's disk slow to flush (etcd-io/etcd#13587, a disk
// whose fsync latency climbs): every fsync and fdatasync of a file in the
// node's etcd data dir waits latency before the kernel runs it, so etcd's
// own code measures it and logs it ("slow fdatasync", past a second, with
// its took and expected-duration). On a leader the raft loop stalls in the
// WAL's sync and heartbeats go out late ("leader failed to send out
// heartbeat on time"), followers elect another leader; a learner with the
// slow disk acknowledges its leader's appends a sync late and stays behind
// it, so the leader refuses to promote it ("learner is not ready").
//
// On the sim the syncs are held by a seccomp filter with user notification
// (Linux 5.7+) on the talchaos process: a kernel or sandbox without it
// (`talchaos faults` says no) refuses the fault before the run starts. The
// filter stays for the life of the process and is inherited by the programs
// it starts afterwards (their syncs are answered at once); without
// CAP_SYS_ADMIN installing it sets no_new_privs, so a setuid program an exec
// orchestrator's command runs (sudo) gains no privileges. The container and
// real targets cannot slow a disk.
//
// The latency is real time, as network latency is, while Talos's timers run
// timeScale times faster: against Talos's promote window a sim disk is
// timeScale times slower than its latency says. The sim's etcd syncs only on
// the nodes a scenario's slow-disk names (the others skip fsync for speed),
// so one added to a running cluster takes effect at the node's next etcd start.
//
// Not modelled: writes and reads stay as fast as the page cache makes them
// (only the flushes are slow); a disk that fails (I/O errors, a corrupt WAL
// or database: "etcdserver: corrupt cluster"); throughput limits and a queue
// (two syncs at once each wait latency, not one after the other); jitter
// (every sync waits exactly latency, plus the real one); the node's other
// disk users (Talos's own state, the kubelet).
type SlowDisk struct {
	Node    Node              `yaml:"node" doc:"the node; random: a control plane other than the bootstrap node"`
	Latency scenario.Duration `yaml:"latency" doc:"how long each fsync and fdatasync of the node's etcd data waits before it runs (real time, not scaled); etcd warns past 1s"`
}

// maxSyncLatency bounds a sync's latency: past a minute etcd's own timeouts
// have long fired.
const maxSyncLatency = time.Minute

func (SlowDisk) Kind() string      { return "slow-disk" }
func (SlowDisk) Destructive() bool { return false }
func (SlowDisk) Doc() string {
	return "make a node's disk slow to flush: every fsync and fdatasync of its etcd data waits latency " +
		"(etcd logs \"slow fdatasync\"; a slow leader misses heartbeats, a slow learner stays behind)"
}

func (SlowDisk) Example() string { return "{kind: slow-disk, node: cp2, latency: 2s, at: 0s, for: 5m}" }

func (SlowDisk) Needs(*scenario.Scenario) []target.Capability {
	return []target.Capability{target.SlowDisk}
}

func (k SlowDisk) Validate(c *scenario.FaultCheck) {
	c.ControlPlane("node", string(k.Node), "slow-disk slows its etcd data")

	if k.Latency.Duration == 0 {
		c.Errorf("latency", "required: a duration up to %s", maxSyncLatency)

		return
	}

	c.Duration("latency", k.Latency, time.Millisecond, maxSyncLatency)
}

// DiskNode implements target.DiskFault: the sim's etcd syncs its data on
// this node (every node for "random") in a run that plans the fault.
func (k SlowDisk) DiskNode() string { return string(k.Node) }

func (k SlowDisk) Inject(ctx context.Context, env *Env) (target.Heal, error) {
	d, ok := env.Cluster.(target.Disks)
	if !ok {
		return nil, fmt.Errorf("the cluster cannot act on node disks")
	}

	return d.SlowDisk(ctx, string(k.Node), k.Latency.Duration)
}
