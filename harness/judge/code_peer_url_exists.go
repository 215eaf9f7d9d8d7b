package judge

import (
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "peer-url-exists",
	Doc:      "a join was refused because a member with the node's peer URL already exists (its own earlier add, whose reply was lost)",
	Diagnose: peerURLExists,
	Remedy: func(r RemedyFor) []string {
		return r.RemoveLearners(func(m history.Member) bool { return m.Hostname == "" })
	},
})

// peerURLExists: a join was refused because a member with the node's peer URL
// already exists (its own earlier add, whose reply was lost).
func peerURLExists(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.controlPlanes() {
		if line, ok := ev.lastLine(n.Name, errPeerURLExists); ok {
			out = append(out, diag("peer-url-exists", n.Name,
				n.Name+" cannot join: a member with its peer URL is already in the cluster", line.Text, line.At))
		}
	}

	return out
}
