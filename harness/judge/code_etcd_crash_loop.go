package judge

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "etcd-crash-loop",
	Doc:      "etcd exits and is restarted every 5 s for good: its data does not fit the cluster",
	Diagnose: etcdCrashLoop,
	Remedy: func(r RemedyFor) []string {
		return append(r.RemoveLearners(r.OwnLearner), ResetCommand(r.Addr))
	},
})

// etcdCrashLoop: a node's etcd keeps exiting and being restarted by
// restart.Forever, every 5 s, for good: its data directory disagrees with
// the cluster (a member removed while its data was kept, a member list of
// another size). Only wiping the data (reset EPHEMERAL) ends it.
func etcdCrashLoop(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	window := ev.Clock.Wall(crashLoopWindow)

	for _, node := range slices.Sorted(maps.Keys(ev.EtcdCrashes)) {
		crashes := ev.EtcdCrashes[node]

		most, at := 0, 0

		for i, c := range crashes {
			n := 0

			for _, p := range crashes[:i+1] {
				if c.At-p.At <= window {
					n += p.New
				}
			}

			if n > most {
				most, at = n, i
			}
		}

		if most < crashLoopAt {
			continue
		}

		last := crashes[at]

		out = append(out, diag("etcd-crash-loop", node,
			fmt.Sprintf("%s's etcd exited and was restarted %d times within %s: its data does not fit the cluster, and restarting cannot fix that", node, most, crashLoopWindow),
			fmt.Sprintf("etcd %s: %s (at %s)", last.State, last.Message, ev.Clock.TalosString(last.At)), ev.Now))
	}

	return out
}

// crashLoopAt restarts within crashLoopWindow (Talos time) make a crash loop,
// not a hiccup: restart.Forever restarts a task every 5 s.
const (
	crashLoopAt     = 3
	crashLoopWindow = 2 * time.Minute
)
