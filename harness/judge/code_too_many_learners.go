package judge

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "too-many-learners",
	Doc:      "a control plane was refused by etcd because the learner slot was taken: for good, or for long before it got in",
	Diagnose: tooManyLearners,
	Remedy: func(r RemedyFor) []string {
		return append(r.RemoveLearners(func(history.Member) bool { return true }),
			"# then wait: "+r.Addr+"'s join loop adds it as the next learner")
	},
})

// tooManyLearners: a control plane was refused because the learner slot was
// taken (talos #5350, field report FR-000): for good when it is still not a member, or for
// long before it finally got in.
func tooManyLearners(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	main := ev.Final.Main()

	for _, n := range ev.controlPlanes() {
		line, ok := ev.firstLine(n.Name, errTooManyLearners)
		if !ok || len(main.Members) == 0 {
			// Without a member list, whether it got in is unknown.
			continue
		}

		if _, member := main.MemberOf(n); member {
			// Joiners wait in line behind learners that Talos promotes, slowly
			// with many control planes (v1.12's promote loop stalls on the
			// endpoints of members not running yet, talos #14097): a queue,
			// not a stuck slot. The slot was stuck when the learner holding
			// it was never promoted but removed, or wiped, to free it.
			blocked, by, promoted := ev.slotTaken(n.Name, line.At)
			if blocked < ev.Clock.Wall(blockedLong) || promoted {
				continue
			}

			out = append(out, diag("too-many-learners", n.Name,
				fmt.Sprintf("%s was refused by etcd while %s held the learner slot for %s", n.Name, by, ev.span(blocked)),
				line.Text, line.At))

			continue
		}

		if main.Learners() == 0 {
			// The slot is free at the end: whatever keeps the node out now
			// (back in maintenance, down, a Failed service) is not the
			// learner limit, and is diagnosed as what it is.
			continue
		}

		state := "unknown"
		if n.Etcd != nil {
			state = n.Etcd.State + " " + n.Etcd.Message
		}

		out = append(out, diag("too-many-learners", n.Name,
			fmt.Sprintf("%s cannot join etcd: the cluster already has %d learner(s), the limit; its etcd service is %s", n.Name, main.Learners(), state),
			line.Text, line.At))
	}

	return out
}

// blockedLong is how long (Talos time) one learner must have blocked a refused
// join to count: a joiner refused while the previous learner is promoted is
// normal.
const blockedLong = 2 * time.Minute

// slotTaken is how long, after a refusal at `at`, one other learner kept the
// slot node was waiting for: the longest stretch any single learner held it
// (until its promotion, or until node got in itself), who held it and
// whether that learner was promoted in the end.
func (ev *Evidence) slotTaken(node string, at time.Duration) (held time.Duration, by string, promoted bool) {
	joined, ok := ev.LearnerSince(node)
	if !ok {
		joined = ev.Now
	}

	for _, o := range ev.controlPlanes() {
		since, ok := ev.LearnerSince(o.Name)
		if o.Name == node || !ok || since > joined {
			continue
		}

		end, wasPromoted, ended := ev.StintEnd(o.Name)
		if !ended || end > joined {
			// Still a learner when node got in: the slot was freed by its
			// removal (a promotion after that is of a later join).
			end, wasPromoted = joined, false
		}

		if d := end - max(since, at); d > held {
			held, by, promoted = d, o.Name, wasPromoted
		}
	}

	return held, by, promoted
}
