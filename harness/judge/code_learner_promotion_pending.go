package judge

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "learner-promotion-pending",
	Doc:      "a learner still inside its promote window, which Talos may yet promote",
	Diagnose: learnerPromotionPending,
	Remedy: func(r RemedyFor) []string {
		return append([]string{"# wait: Talos retries the promotion until its promote window ends, then never again",
			fmt.Sprintf("talosctl -n %s etcd status   # a learner far behind the leader's raft index is refused promotion", r.Addr),
			fmt.Sprintf("talosctl -n %s logs machined   # the promote loop's 'retrying error:' lines", r.Addr),
			"# if it is still a learner when the window has passed, it never will be:"},
			remedyComment(append(r.RemoveLearners(r.OwnLearner), ResetCommand(r.Addr)))...)
	},
})

// learnerPromotionPending: a learner inside its promote window, with no sign
// that Talos gave up. It may still be promoted; the diagnosis says until when,
// and what would make it never happen.
func learnerPromotionPending(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, l := range ev.learners() {
		if l.given(ev) {
			continue
		}

		var msg string

		switch {
		case l.known:
			msg = fmt.Sprintf("member %s (%s) is still a learner, %s into its %s promote window: Talos may still promote it, and gives up in %s",
				l.member.IDString(), l.member.Hostname, ev.Clock.TalosString(l.age), ev.Clock.TalosString(ev.PromoteWindow), ev.Clock.TalosString(ev.PromoteWindow-l.age))

			if !l.started.IsZero() && !l.seen {
				msg += fmt.Sprintf(" (at %s by the node's clock)", l.started.Add(ev.PromoteWindow).UTC().Format(time.RFC3339))
			}
		case l.node == nil:
			msg = fmt.Sprintf("member %s (%s) is a learner on a node that was not examined: whether Talos is still promoting it is unknown",
				l.member.IDString(), l.member.Hostname)
		default:
			msg = fmt.Sprintf("member %s (%s) is a learner, but its node does not show how long its etcd has been running: whether Talos is still promoting it is unknown",
				l.member.IDString(), l.member.Hostname)
		}

		if l.logged && !l.joined {
			msg += fmt.Sprintf("; its machined log of this boot shows no join (%q): if etcd started from its data directory, Talos runs no promote loop and it will never be promoted", joinNag)
		}

		evidence := l.runningFor(ev) + ", no \"failed promoting member\" in its machined log"
		if l.node != nil && l.node.Mode != history.ModeConfigured {
			evidence = l.name + " is " + l.node.Mode + ": " + l.node.APIError
		}

		out = append(out, diag("learner-promotion-pending", l.name, msg+syncNote(ev, l.name), evidence, ev.Now))
	}

	return out
}
