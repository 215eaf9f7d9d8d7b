package judge

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "apply-reply-lost",
	Doc:      "an ApplyConfiguration failed without an answer, yet the node left maintenance: the config was applied and the reply lost",
	Diagnose: applyReplyLost,
	Remedy: func(r RemedyFor) []string {
		return []string{fmt.Sprintf("talosctl -n %s version   # the config is applied: do not re-apply with --insecure", r.Addr)}
	},
})

// applyReplyLost: an ApplyConfiguration call failed without an answer, yet the
// node then left maintenance and no successful apply explains it: the config
// was applied and the reply lost (talos #8566). A failure that says nothing was
// applied (the call refused before it acted, a connection never made) is no
// such call, whatever happened next.
func applyReplyLost(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		applies := ev.calls(n.Name, "ApplyConfiguration")

		prev := time.Duration(-1)

		for _, left := range ev.Changes {
			if left.Node != n.Name || !left.LeftMaintenance {
				continue
			}

			if failed, ok := lostApply(ev, applies, prev, left.At); ok {
				out = append(out, diag("apply-reply-lost", n.Name,
					n.Name+" applied its configuration but the reply never reached the client",
					fmt.Sprintf("%s; then %s left maintenance at %s with no successful ApplyConfiguration to explain it",
						describeCall(failed), n.Name, ev.span(left.At)), failed.At))

				break
			}

			prev = left.At
		}
	}

	return out
}

// applySettle is how long after a node is seen leaving maintenance the reply of
// the call that made it leave may still be on its way to the client.
const applySettle = 2 * time.Second

// lostApply finds the call that must have made a node leave maintenance at
// `left` (ms), the previous leaving being at `prev`, when that call failed: the
// calls that ended since `prev`, and the one that was still in flight when the
// node was seen leaving (calls to one node are sequential, so that is the first
// to end after it, if it had started before; its recorded duration says so,
// however late a loaded machine let it end). A success among
// them explains the leaving; otherwise the last failure that may have acted is
// the call whose reply was lost.
func lostApply(ev *Evidence, applies []CallAt, prev, left time.Duration) (CallAt, bool) {
	var (
		candidate CallAt
		found     bool
	)

	consider := func(c CallAt) bool {
		if c.OK() {
			return false // a success explains the leaving
		}

		if c.Failure.MayHaveActed() {
			candidate, found = c, true
		}

		return true
	}

	for _, c := range applies {
		if c.At > prev && c.At <= left && !consider(c) {
			return CallAt{}, false
		}
	}

	for _, c := range applies {
		if c.At <= left {
			continue
		}

		// In flight when the node was seen leaving: started before, ended after.
		started := c.At - time.Duration(c.DurationMs)*time.Millisecond
		inFlight := started <= left
		if c.OK() && (inFlight || c.At-left <= applySettle) {
			return CallAt{}, false
		}

		if inFlight && !c.OK() && c.Failure.MayHaveActed() {
			candidate, found = c, true
		}

		break
	}

	return candidate, found
}
