package judge

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "slow-disk",
	Doc: "a node's disk is slow to flush: its etcd's WAL fdatasync took over a second (\"slow fdatasync\"), so its raft " +
		"loop stalls: as leader it misses heartbeats and loses elections, as a learner it stays behind and is not promoted",
	Diagnose: slowDisk,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s logs etcd | grep -E 'slow fdatasync|heartbeat on time'   # how slow, how often", r.Addr),
			fmt.Sprintf("talosctl -n %s get disks   # what etcd's data (/var) sits on: etcd wants an SSD, p99 WAL fsync under 10ms", r.Addr),
			"# move /var to a faster disk, or off a shared or throttled volume (a VM's disk cache mode, IOPS limits, a noisy neighbour); " +
				"then bring the node back into etcd (a learner past its promote window: remove its member, reset the node and join again)",
		}
	},
})

// slowDisk: a node's etcd logged "slow fdatasync" (etcd 3.6
// server/storage/wal/wal.go sync: a WAL fdatasync that took over
// warnSyncDuration, one second; etcd 3.4 and earlier wrote "wal: sync
// duration of …"), the field's slow or throttled disk (etcd-io/etcd#13587).
// The node's raft loop waits for every such sync: a leader sends its
// heartbeats late and its followers elect another, a follower or learner
// acknowledges its leader's appends late and stays behind.
func slowDisk(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, node := range slices.Sorted(maps.Keys(ev.etcd)) {
		var (
			n           int
			first, last LogLine
			worst       time.Duration
		)

		for _, l := range ev.EtcdLogs(node) {
			var entry struct {
				Msg  string `json:"msg"`
				Took string `json:"took"`
			}

			if json.Unmarshal([]byte(l.Text), &entry) != nil || entry.Msg != history.SlowFdatasync {
				continue
			}

			if n == 0 {
				first = l
			}

			n++
			last = l

			if d, err := time.ParseDuration(entry.Took); err == nil {
				worst = max(worst, d)
			}
		}

		if n == 0 {
			continue
		}

		msg := node + "'s disk is slow to flush: its etcd waited over a second for fdatasync of its WAL"
		if worst > 0 {
			msg = fmt.Sprintf("%s's disk is slow to flush: its etcd waited up to %s for fdatasync of its WAL (etcd expects under 1s, "+
				"a healthy disk takes milliseconds)", node, worst.Round(time.Millisecond))
		}

		if o, ok := ev.Final.Nodes[node]; ok && o.Status != nil && o.Status.IsLearner {
			msg += "; its learner acknowledges its leader's appends a sync late and stays behind it"
		}

		evidence := fmt.Sprintf("%s etcd: %s; %d time(s), first at %s, last at %s",
			node, etcdSummary(first.Text), n, ev.span(first.At), ev.span(last.At))

		out = append(out, diag("slow-disk", node, msg, evidence, first.At))
	}

	return out
}
