package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "learner-not-promoted",
	Doc:      "a learner whose promote loop gave up, or whose 10-minute promote window has passed: Talos never promotes it",
	Diagnose: learnerNotPromoted,
	Remedy: func(r RemedyFor) []string {
		return append(r.RemoveLearners(r.OwnLearner), ResetCommand(r.Addr))
	},
})

// learnerNotPromoted: a learner whose promote loop gave up, or whose 10-minute
// promote window has passed, stays a learner for good; nothing in Talos retries
// (talos #5794, #7903, field report FR-000).
func learnerNotPromoted(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, l := range ev.learners() {
		if !l.given(ev) {
			continue
		}

		evidence := l.runningFor(ev) + ", promote window " + ev.Clock.TalosString(ev.PromoteWindow)
		at := ev.Now

		if l.hasFailed {
			evidence = l.failed.Text + "\n(" + evidence + ")"
			at = l.failed.At
		}

		out = append(out, diag("learner-not-promoted", l.name,
			fmt.Sprintf("member %s (%s) is a learner whose promotion window has closed; it will never be promoted%s",
				l.member.IDString(), l.member.Hostname, syncNote(ev, l.name)),
			evidence, at))
	}

	return out
}
