package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "stale-learner",
	Doc:      "a learner that was added but never started (no name) blocks every later join",
	Diagnose: staleLearner,
	Remedy: func(r RemedyFor) []string {
		return r.RemoveLearners(func(m history.Member) bool { return m.Hostname == "" })
	},
})

// staleLearner: a learner that was added but never started (empty name) blocks
// every later join, and no node is going to start it.
func staleLearner(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, m := range ev.Final.Main().Members {
		if !m.IsLearner || m.Hostname != "" {
			continue
		}

		// Its node by its peer URLs: on any of the node's addresses.
		out = append(out, diag("stale-learner", ev.Final.NodeOf(m),
			fmt.Sprintf("member %s %v was added as a learner but never started", m.IDString(), m.PeerURLs),
			fmt.Sprintf("EtcdMemberList: id %s, hostname \"\", is_learner true, peer URLs %v", m.IDString(), m.PeerURLs), ev.Now))
	}

	return out
}
