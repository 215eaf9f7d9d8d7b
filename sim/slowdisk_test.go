package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"golang.org/x/sys/unix"

	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/diskgate"
	"github.com/talchaos/talchaos/sim/simtest"
)

// onTmpfs puts the test's nodes' data (under os.TempDir) on tmpfs, where a
// real sync takes no time: a slow sync is then the gate's alone. On a disk,
// a machine busy writing (make test's other lanes build images) once made
// every member's real fdatasync take 1.2 to 2.9 s, and etcd rightly warned
// on nodes without the fault.
func onTmpfs(t *testing.T) {
	t.Helper()

	// Three members' data take about 400 MiB (etcd preallocates its WAL).
	const room = 1 << 30

	var (
		st  unix.Statfs_t
		dir string
	)

	err := unix.Statfs("/dev/shm", &st)
	if err == nil && (st.Type != unix.TMPFS_MAGIC || st.Bavail*uint64(st.Bsize) < room) { //nolint:gosec // a block size is positive
		err = errors.New("not tmpfs, or under 1 GiB free")
	}

	if err == nil {
		dir, err = os.MkdirTemp("/dev/shm", "talchaos-test-")
	}

	if err != nil {
		t.Logf("/dev/shm: %v: the nodes' data stays on %s, whose real syncs count too", err, os.TempDir())

		return
	}

	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	t.Setenv("TMPDIR", dir)
}

// etcdLines are the lines of a node's etcd log whose msg is msg, decoded.
func etcdLines(c *sim.Cluster, node, msg string) []map[string]any {
	var out []map[string]any

	for _, l := range c.Node(node).Log("etcd").Lines() {
		var entry map[string]any
		if json.Unmarshal([]byte(l), &entry) == nil && entry["msg"] == msg {
			out = append(out, entry)
		}
	}

	return out
}

// memberStatus is a member's raft view, straight from its etcd.
func memberStatus(ctx context.Context, c *sim.Cluster, node string) (id, leader, term uint64, err error) {
	ec, err := c.EtcdClient(ctx, node)
	if err != nil {
		return 0, 0, 0, err
	}
	defer ec.Close() //nolint:errcheck

	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()

	st, err := ec.Status(sctx, fmt.Sprintf("%s:2379", c.Node(node).Address()))
	if err != nil {
		return 0, 0, 0, err
	}

	return st.Header.MemberId, st.Leader, st.RaftTerm, nil
}

const (
	slowFdatasync = "slow fdatasync"
	lateHeartbeat = "leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk"
)

// TestSlowDisk: a slow-disk fault on the leader of three voters makes etcd's
// own WAL sync slow: etcd logs its "slow fdatasync" warning (took the
// latency, expected 1s), its raft loop stalls in the sync so it sends its
// heartbeats late ("leader failed to send out heartbeat on time") and the
// followers elect another leader. Without the fault, and once healed, none.
func TestSlowDisk(t *testing.T) {
	if err := diskgate.Available(); err != nil {
		t.Skipf("the sim cannot slow a disk here: %v", err)
	}

	ctx, cancel := runningContext(4 * time.Minute)
	defer cancel()

	onTmpfs(t)

	const latency = 1500 * time.Millisecond

	// The scenario plans the fault (on a node the run picks): the sim's etcd
	// syncs its data on every control plane, as a run would.
	sc := newScenario(3)
	sc.Faults = []scenario.Fault{{Name: "slow", Kind: "slow-disk", Spec: chaos.SlowDisk{Node: scenario.RandomNode}}}

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()

	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)
	waitVoters(t, ctx, cl, 3)

	// Without the fault: writes, real fsyncs, no warning.
	leader, term0 := leaderOf(t, ctx, c)
	follower := otherThan(c, leader)

	stop := writer(t, ctx, c, follower)
	defer stop()

	time.Sleep(2 * time.Second)

	// (A loaded machine delays the sim's 50 ms heartbeats now and then
	// without any fault: etcd's heartbeat warning is no proof of a slow disk.)
	for _, n := range nodes {
		if l := etcdLines(c, n.Name, slowFdatasync); len(l) > 0 {
			t.Errorf("%s logged %q without the fault: %v", n.Name, slowFdatasync, l)
		}
	}

	late := len(etcdLines(c, leader, lateHeartbeat))

	// Syncs a little slower than two heartbeats (the sim's etcd ticks every
	// 50 ms, elects after 500 ms): the leader's raft loop, stalled in its WAL
	// sync, sends its heartbeats late, yet no follower times out.
	heal := inject(t, ctx, c, chaos.SlowDisk{Node: chaos.Node(leader), Latency: scenario.Duration{Duration: 300 * time.Millisecond}})

	// A heartbeat late by most of a sync.
	eventually(t, time.Minute, func() error {
		for _, l := range etcdLines(c, leader, lateHeartbeat)[late:] {
			if d, err := time.ParseDuration(fmt.Sprint(l["exceeded-duration"])); err == nil && d >= 150*time.Millisecond {
				return nil
			}
		}

		return fmt.Errorf("%s has not logged %q exceeded by at least 150ms", leader, lateHeartbeat)
	})

	if err := heal(); err != nil {
		t.Fatal(err)
	}

	// Syncs past etcd's warning (1 s) and past the election timeout: etcd
	// warns "slow fdatasync", and the followers, hearing nothing from the
	// leader while it syncs, elect a leader in a new term.
	leader, term0 = leaderOf(t, ctx, c)

	heal = inject(t, ctx, c, chaos.SlowDisk{Node: chaos.Node(leader), Latency: scenario.Duration{Duration: latency}})

	eventually(t, time.Minute, func() error {
		lines := etcdLines(c, leader, slowFdatasync)
		if len(lines) == 0 {
			return fmt.Errorf("%s has not logged %q", leader, slowFdatasync)
		}

		took, err := time.ParseDuration(fmt.Sprint(lines[0]["took"]))
		if err != nil || took < latency || lines[0]["expected-duration"] != "1s" || lines[0]["level"] != "warn" {
			return fmt.Errorf("%s logged %v, want a warning that took at least %s, expected-duration 1s", leader, lines[0], latency)
		}

		return nil
	})

	eventually(t, time.Minute, func() error {
		_, _, term, err := memberStatus(ctx, c, otherThan(c, leader))
		if err != nil {
			return err
		}

		if term <= term0 {
			return fmt.Errorf("raft term %d, want an election past term %d", term, term0)
		}

		return nil
	})

	for _, n := range nodes {
		if n.Name != leader && len(etcdLines(c, n.Name, slowFdatasync)) > 0 {
			t.Errorf("%s, whose disk is not slow, logged %q", n.Name, slowFdatasync)
		}
	}

	if err := heal(); err != nil {
		t.Fatal(err)
	}

	healed := time.Now()

	// Healed: no sync that starts from now on is slow. One that started
	// before may be logged slow after the heal (it waited before it; under
	// load its line comes late): a sync's start is its line's time less
	// what it took.
	time.Sleep(3 * time.Second)

	for _, l := range etcdLines(c, leader, slowFdatasync) {
		ts, ok := l["ts"].(float64)
		took, err := time.ParseDuration(fmt.Sprint(l["took"]))

		if err != nil || !ok {
			t.Errorf("%s logged %v: no time or duration", leader, l)

			continue
		}

		if started := time.Unix(0, int64(ts*float64(time.Second))).Add(-took); started.After(healed) {
			t.Errorf("%s logged %q of a sync started %s after the heal: %v", leader, slowFdatasync, started.Sub(healed), l)
		}
	}

	if t.Failed() {
		for _, n := range nodes {
			for _, l := range c.Node(n.Name).Log("etcd").Lines() {
				if strings.Contains(l, `"warn"`) || strings.Contains(l, "elected leader") {
					t.Logf("%s etcd: %s", n.Name, l)
				}
			}
		}
	}
}

// leaderOf is the cluster's leader and the highest raft term a member reports.
func leaderOf(t *testing.T, ctx context.Context, c *sim.Cluster) (string, uint64) {
	t.Helper()

	names := map[uint64]string{}

	var leaderID, maxTerm uint64

	for _, n := range c.Nodes() {
		eventually(t, 30*time.Second, func() error {
			id, leader, term, err := memberStatus(ctx, c, n.Name)
			if err != nil {
				return err
			}

			if leader == 0 {
				return fmt.Errorf("%s knows no leader", n.Name)
			}

			names[id], leaderID, maxTerm = n.Name, leader, max(maxTerm, term)

			return nil
		})
	}

	if names[leaderID] == "" {
		t.Fatalf("leader %x is no member", leaderID)
	}

	return names[leaderID], maxTerm
}

// otherThan is a control plane other than node.
func otherThan(c *sim.Cluster, node string) string {
	for _, n := range c.Nodes() {
		if n.Name != node {
			return n.Name
		}
	}

	return ""
}

// TestSlowDiskLearner: a control plane whose disk takes over a second per
// flush joins as a learner while the cluster is written to: its etcd logs
// "slow fdatasync" as it starts and catches up one flush at a time, and the
// leader refuses to promote it ("rejecting promote learner: learner is not
// ready") while it is behind.
func TestSlowDiskLearner(t *testing.T) {
	if err := diskgate.Available(); err != nil {
		t.Skipf("the sim cannot slow a disk here: %v", err)
	}

	ctx, cancel := runningContext(3 * time.Minute)
	defer cancel()

	sc := newScenario(2)
	sc.Cluster.Workload = scenario.Workload{WritesPerSecond: 50, ValueBytes: 256}
	slow := chaos.SlowDisk{Node: "cp2", Latency: scenario.Duration{Duration: 1100 * time.Millisecond}}
	sc.Faults = []scenario.Fault{{Name: "slow", Kind: slow.Kind(), Spec: slow}}

	c := simtest.FromScenario(t, sc, 1)
	nodes := c.Nodes()

	inject(t, ctx, c, slow)

	cl := applyAndBootstrap(t, ctx, c, nodes[0].Endpoint)

	eventually(t, time.Minute, func() error {
		if len(etcdLines(c, "cp2", slowFdatasync)) == 0 {
			return fmt.Errorf("cp2 has not logged %q", slowFdatasync)
		}

		if len(etcdLines(c, "cp1", "rejecting promote learner: learner is not ready")) == 0 {
			return errors.New("cp1 has not refused to promote cp2")
		}

		return nil
	})

	// Talos's promote window (10 minutes, 10 s here) ends before cp2 has
	// caught up: it gives up, and cp2 stays a learner (a learner on a fast
	// disk is promoted within a second or two).
	eventually(t, time.Minute, func() error {
		for _, l := range c.Node("cp2").Log("machined").Lines() {
			if strings.Contains(l, "failed promoting member") {
				return nil
			}
		}

		return errors.New("cp2's promote loop has not given up")
	})

	resp, err := cl.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
	if err != nil {
		t.Fatal(err)
	}

	for _, m := range resp.Messages[0].Members {
		if m.Hostname != "cp1" && !m.IsLearner {
			t.Errorf("member %x (%q) is a voter, want cp2 a learner", m.Id, m.Hostname)
		}
	}

	if l := etcdLines(c, "cp1", slowFdatasync); len(l) > 0 {
		t.Errorf("cp1, whose disk is not slow, logged %q: %v", slowFdatasync, l)
	}
}
