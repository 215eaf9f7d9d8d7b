package judge

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
)

// voidingStall is the shortest stall of talchaos's own process, in Talos
// time, across which a failed expectation is not the cluster's: a minute,
// half the shortest window the judge and the resilient orchestrator count
// with (a learner older than two minutes is stale), and the Talos time of
// any stall the run can tell at a time scale of 12 or more (it tells those of
// 5 s). While the process stood still nothing of talchaos ran (orchestrator,
// observer, on the sim the nodes' etcd and timers); on containers the whole
// machine may have stood still with it. When it resumed, every deadline and
// window that the stall spanned had run out at once: a learner's promote
// window, a join's timeout, the orchestrator's waits.
const voidingStall = time.Minute

// stallVoids says why a failing verdict is void: the history records a
// stall of the process of at least voidingStall of Talos time. Empty when it
// records none.
func stallVoids(h history.History) string {
	clk := clock.New(h.Scale)

	var (
		longest history.Entry
		n       int
	)

	for _, e := range h.Entries {
		if e.Stall == nil || clk.Talos(stallOf(e)) < voidingStall {
			continue
		}

		n++

		if longest.Stall == nil || e.Stall.DurationMs > longest.Stall.DurationMs {
			longest = e
		}
	}

	if n == 0 {
		return ""
	}

	d := stallOf(longest)
	from := longest.At() - d

	more := ""
	if n > 1 {
		more = " (and a shorter stall of a Talos minute or more)"
		if n > 2 {
			more = fmt.Sprintf(" (and %d shorter stalls of a Talos minute or more)", n-1)
		}
	}

	return fmt.Sprintf("the host did not run talchaos for %s from %s into the run (%s of Talos time at %gx)%s, "+
		"and the expectations failed: every deadline and window across it ran out at once, so the failure may be "+
		"the host's, not the cluster's; this run says nothing of the cluster, run it again (its checks and diagnoses are as the history shows them)",
		d.Round(time.Millisecond), from.Round(time.Millisecond), clk.TalosString(d), h.Scale, more)
}

func stallOf(e history.Entry) time.Duration {
	return time.Duration(e.Stall.DurationMs) * time.Millisecond
}
