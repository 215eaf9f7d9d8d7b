package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "node-in-maintenance",
	Doc:      "a node still answers the insecure maintenance API: it never received a valid configuration",
	Diagnose: nodeInMaintenance,
	Remedy: func(r RemedyFor) []string {
		return []string{fmt.Sprintf("talosctl apply-config --insecure -n %s -f <the node's machine config>", r.Addr)}
	},
})

// nodeInMaintenance: a node still answering the insecure maintenance API never
// got a valid config; it waits forever (field reports FR-001, FR-003).
func nodeInMaintenance(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		if n.Mode != history.ModeMaintenance {
			continue
		}

		evidence := "the insecure client is answered; the talosconfig client gets: " + n.APIError

		var failed []CallAt

		for _, c := range ev.calls(n.Name, "ApplyConfiguration") {
			if !c.OK() {
				failed = append(failed, c)
			}
		}

		if len(failed) > 0 {
			evidence = describeCall(failed[len(failed)-1]) + "; " + evidence
		}

		out = append(out, diag("node-in-maintenance", n.Name,
			n.Name+" is still in maintenance mode: it never received a valid configuration",
			evidence, ev.Now))
	}

	return out
}
