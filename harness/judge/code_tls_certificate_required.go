package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "tls-certificate-required",
	Doc:      "a client without a certificate called a node that had already switched to mutual TLS",
	Diagnose: tlsCertificateRequired,
	Remedy: func(r RemedyFor) []string {
		return []string{fmt.Sprintf("talosctl --talosconfig <talosconfig> -n %s version   # the node has a config: use the talosconfig, not --insecure", r.Addr)}
	},
})

// tlsCertificateRequired: a client without a certificate talked to a node that
// had already switched to mutual TLS (field report FR-004, talos #10185, #9241, #8442).
func tlsCertificateRequired(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	seen := map[string]bool{}

	for _, c := range ev.Calls {
		if c.Failure != history.FailureCertificateRequired || seen[c.Node] {
			continue
		}

		seen[c.Node] = true

		out = append(out, diag("tls-certificate-required", c.Node,
			c.Node+" had left maintenance and requires a client certificate, but was called with the insecure (maintenance) client",
			describeCall(c), c.At))
	}

	return out
}
