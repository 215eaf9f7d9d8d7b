package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "pki-mismatch",
	Doc:      "the node's API certificate is not signed by the talosconfig's CA: configs and talosconfig come from different secrets",
	Diagnose: pkiMismatch,
	Remedy: func(r RemedyFor) []string {
		return []string{"# use the talosconfig generated from the same secrets as the nodes' configs:",
			"talosctl gen config --with-secrets secrets.yaml <cluster> <endpoint>   # never --force a new one",
			fmt.Sprintf("# or reset the node and apply a matching config: talosctl -n %s reset", r.Addr)}
	},
})

// pkiMismatch: the node's API CA is not the talosconfig's (field report FR-001: talosconfig
// regenerated with --force).
func pkiMismatch(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		if n.Mode != history.ModePKIMismatch {
			continue
		}

		out = append(out, diag("pki-mismatch", n.Name,
			n.Name+" is configured, but with other secrets than the talosconfig: its certificate is not signed by the talosconfig's CA",
			n.APIError, ev.Now))
	}

	// A client whose talosconfig calls keep failing with "unknown authority" on a
	// node that is configured (the observer's talosconfig works there) has a
	// talosconfig from other secrets. A failure followed by an answer of the
	// node's (a success, or an error of its own: TLS worked) was only the
	// node still switching out of maintenance.
	for _, n := range ev.Final.Ordered() {
		if n.Mode != history.ModeConfigured {
			continue
		}

		var last *CallAt

		for _, c := range ev.Calls {
			switch {
			case c.Node != n.Name || c.Client != history.ClientTalosconfig:
			case c.Failure == history.FailureUnknownAuthority:
				last = &c
			case c.Failure == history.FailureNone:
				last = nil
			}
		}

		if last != nil {
			out = append(out, diag("pki-mismatch", n.Name,
				"the orchestrator's talosconfig is not trusted by "+n.Name+": it was generated from other secrets than the node's config",
				describeCall(*last), last.At))
		}
	}

	return out
}
