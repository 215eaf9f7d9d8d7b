package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim/diskgate"
)

// SlowDisk implements target.Disks: every fsync and fdatasync etcd makes on a
// file in the node's etcd data dir (the WAL's fdatasync after each raft
// Ready, the WAL directory's fsync, the bbolt database's commits) waits
// latency in the kernel before it runs (package diskgate), until healed.
// etcd's own code measures it: past a second it logs "slow fdatasync".
// The slow disk stays through reboots and wipes of the node (the same
// directory).
//
// The sim's etcd skips its syncs for speed (UnsafeNoFsync) except on the
// nodes a slow-disk fault of the scenario names (every control plane for
// "random"): on another node (a fault added to a running cluster) the
// fault takes effect from the node's next etcd start.
func (c *Cluster) SlowDisk(_ context.Context, node string, latency time.Duration) (target.Heal, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("unknown node %q", node)
	}

	release, err := diskgate.Slow(n.dataDir, latency)
	if err != nil {
		return nil, err
	}

	n.diskSlowed.Store(true)

	c.diskMu.Lock()
	c.diskReleases = append(c.diskReleases, release)
	c.diskMu.Unlock()

	return func() error {
		release()

		return nil
	}, nil
}

// syncsDisk reports whether the node's etcd syncs its data: when the
// scenario plans a slow disk on it, or one was injected.
func (n *Node) syncsDisk() bool {
	if n.diskSlowed.Load() {
		return true
	}

	for _, f := range n.c.sc.Faults {
		if d, ok := f.Spec.(target.DiskFault); ok && (d.DiskNode() == n.name || d.DiskNode() == scenario.RandomNode) {
			return true
		}
	}

	return false
}
