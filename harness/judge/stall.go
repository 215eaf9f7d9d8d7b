package judge

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
)

// stallVoids says why a failing verdict is void: the history records a
// stall of the process of at least history.VoidingStall of Talos time. Empty
// when it records none.
func stallVoids(h history.History) string {
	clk := clock.New(h.Scale)
	voiding := h.VoidingStalls()
	n := len(voiding)

	if n == 0 {
		return ""
	}

	longest := slices.MaxFunc(voiding, func(a, b history.Entry) int { return cmp.Compare(a.Stall.DurationMs, b.Stall.DurationMs) })

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
