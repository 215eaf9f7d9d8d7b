package judge

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "clock-skew",
	Doc: "TLS with a node fails because a certificate is outside its validity by one side's clock " +
		"(x509: certificate has expired or is not yet valid): the node's clock, or the client's, is off",
	Diagnose: clockSkew,
	Remedy: func(r RemedyFor) []string {
		return []string{
			"date -u   # the client's clock, against the times in the error",
			fmt.Sprintf("# %s's clock: read it on its console or BMC (talosctl needs TLS with it too); set its time right "+
				"(a time server it reaches: machine.time.servers; its RTC), then power-cycle it so that it issues its certificates again", r.Addr),
		}
	},
})

// clockSkew: the talosconfig client and a node do not take each other's
// certificate as valid now (talos #6462, #3033): the node issued its API
// certificate from a clock ahead of the client's ("current time … is
// before …"), or behind it ("… is after …"), or it judges the client's
// certificate by such a clock ("tls: expired certificate"). Seen by the
// observer at the end, or in the orchestrator's last calls to the node.
func clockSkew(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		if n.Mode == history.ModeCertificateTime {
			out = append(out, diag("clock-skew", n.Name, skewMessage(n.Name, n.APIError), n.APIError, ev.Now))

			continue
		}

		// The orchestrator's calls: the last one that failed so, when the
		// node answered none after it (an answer, even an error, is TLS that
		// worked).
		var last *CallAt

		for _, c := range ev.Calls {
			switch {
			case c.Node != n.Name:
			case c.Failure == history.FailureCertificateTime:
				last = &c
			case c.Failure == history.FailureNone:
				last = nil
			}
		}

		if last != nil {
			out = append(out, diag("clock-skew", n.Name, skewMessage(n.Name, last.Message), describeCall(*last), last.At))
		}
	}

	return out
}

// skewMessage says what an error shows of node's clock: the client checked
// the node's certificate by its own clock ("current time T is before B":
// the node issued it from a clock at least B-T ahead; "is after B": it
// expired by the client's clock, issued from a clock behind).
func skewMessage(node, text string) string {
	now, bound, before, ok := history.CertificateTime(text)

	switch {
	case !ok:
		return fmt.Sprintf("%s and the client do not take each other's certificate as valid now: one of their clocks is off", node)
	case before:
		return fmt.Sprintf("%s's certificate is valid only from %s, %s after the client's time: %s's clock is at least that far ahead",
			node, bound.Format(time.RFC3339), bound.Sub(now).Round(time.Second), node)
	default:
		return fmt.Sprintf("%s's certificate expired at %s by the client's clock, %s before it: %s's clock is behind",
			node, bound.Format(time.RFC3339), now.Sub(bound).Round(time.Second), node)
	}
}
