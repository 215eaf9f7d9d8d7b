package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "api-unreachable",
	Doc:      "a node answers neither the talosconfig client nor the insecure one: powered off, rebooting for good, or cut off",
	Diagnose: apiUnreachable,
	Remedy: func(r RemedyFor) []string {
		return []string{"# is the machine powered on, booted and on the network? check its console, BMC or hypervisor",
			fmt.Sprintf("talosctl -n %s version   # 'connection refused': the machine is up but apid is not listening; a timeout: the address is unreachable", r.Addr)}
	},
})

// apiUnreachable: a node answers neither the talosconfig client nor the
// insecure one: powered off, rebooting for good, or cut off from the network.
// Nothing else can be learnt about it through the API.
func apiUnreachable(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	main := ev.Final.Main()

	for _, n := range ev.Final.Ordered() {
		if n.Mode != history.ModeDown {
			continue
		}

		msg := n.Name + "'s Talos API does not answer"

		if m, ok := main.MemberOf(n); ok {
			kind := "a voting member"
			if m.IsLearner {
				kind = "a learner"
			}

			msg += fmt.Sprintf("; it is etcd member %s, %s of a cluster with %d voter(s)", m.IDString(), kind, main.Voters())
		}

		at := ev.Now

		// When the run saw it go down.
		for _, c := range ev.Changes {
			if c.Node == n.Name && c.To == history.ModeDown {
				at = c.At
			}
		}

		if at < ev.Now {
			msg += " (down since " + ev.span(at) + ")"
		}

		out = append(out, diag("api-unreachable", n.Name, msg, n.APIError, at))
	}

	return out
}
