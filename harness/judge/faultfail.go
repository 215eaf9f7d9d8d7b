package judge

import (
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
)

// faultFailures says why a run whose fault could not be injected or healed
// (a fault event of phase error) is no run of its scenario, or "" when every
// fault that started did so, and healed when it was healed. A scenario that
// passes without the fault it is about would tell a nightly job that the
// bootstrap survives a failure that never happened; one that fails while a
// fault could not be healed may fail of the harness's leftover. Either way
// the verdict is error (exit 3), whatever the checks say, as a run the
// harness could not carry out is; unlike a stall's, the run is not void:
// run again, a harness that cannot inject the fault fails the same way, and
// hunt and nightly count it an error, not outside their rates.
func faultFailures(h history.History) string {
	var failed []*history.FaultEvent

	for _, e := range h.Entries {
		if e.Fault != nil && e.Fault.Phase == history.FaultFailed {
			failed = append(failed, e.Fault)
		}
	}

	if len(failed) == 0 {
		return ""
	}

	first := failed[0]

	what, why := "injected", first.Error
	if rest, ok := strings.CutPrefix(why, "heal: "); ok {
		what, why = "healed", rest
	}

	more := ""
	if n := len(failed) - 1; n == 1 {
		more = " (and one more fault failed)"
	} else if n > 1 {
		more = fmt.Sprintf(" (and %d more faults failed)", n)
	}

	return fmt.Sprintf("fault %q (%s) could not be %s: %s%s; the run did not do what the scenario asks, so its verdict "+
		"says nothing of the cluster under that fault (its checks and diagnoses are as the history shows them)",
		first.Name, first.Kind, what, why, more)
}
