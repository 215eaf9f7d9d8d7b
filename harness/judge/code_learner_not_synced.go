package judge

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "learner-not-synced",
	Doc:      "the leader kept refusing to promote a learner that was not in sync with it",
	Diagnose: learnerNotSynced,
	Remedy: func(r RemedyFor) []string {
		return []string{"# wait while it catches up, and check the network between " + r.Addr + " and the etcd leader",
			fmt.Sprintf("talosctl -n %s etcd status", r.Addr)}
	},
})

// learnerNotSynced: the leader kept refusing to promote a learner that was
// behind (talos #5350, #13710): "rejecting promote learner: learner is not
// ready" in its etcd log, which names no member, so it is attributed to the
// node that was a learner at that moment.
func learnerNotSynced(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.controlPlanes() {
		refusals := ev.leaderRefusals(n.Name)
		if len(refusals) == 0 {
			continue
		}

		first, last := refusals[0], refusals[len(refusals)-1]
		if last.At-first.At < ev.Clock.Wall(refusedLong) {
			continue
		}

		out = append(out, diag("learner-not-synced", n.Name,
			fmt.Sprintf("%s's promotion was refused for %s while its etcd learner was not in sync with the leader%s",
				n.Name, ev.span(last.At-first.At), syncNote(ev, n.Name)),
			last.Text, last.At))
	}

	return out
}

// refusedLong is how long (Talos time) the leader must have kept refusing a
// learner's promotion to count: the first attempts come before any learner has
// caught up, in every healthy join.
const refusedLong = 30 * time.Second
