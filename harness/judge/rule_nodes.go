package judge

import (
	"fmt"
	"time"

	"github.com/talchaos/talchaos/harness/history"

	"github.com/talchaos/talchaos/harness/result"
)

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

		if m, ok := main.Member(n.Name, n.Address); ok {
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
	// talosconfig from other secrets. A failure followed by a success was only
	// the node still switching out of maintenance.
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
			case c.OK():
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

// describeCall is a call as evidence: "ApplyConfiguration cp2 (insecure): Unavailable: ...".
func describeCall(c CallAt) string {
	if c.OK() {
		return fmt.Sprintf("%s %s (%s): ok", c.RPC, c.Node, c.Client)
	}

	return fmt.Sprintf("%s %s (%s): rpc error: code = %s desc = %s", c.RPC, c.Node, c.Client, c.Code, c.Message)
}

// configInvalid: the node refused the config with InvalidArgument (field report FR-001).
func configInvalid(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	seen := map[string]bool{}

	for _, c := range ev.Calls {
		if c.RPC != "ApplyConfiguration" || c.Code != "InvalidArgument" || seen[c.Node] {
			continue
		}

		seen[c.Node] = true

		out = append(out, diag("config-invalid", c.Node, "the machine configuration for "+c.Node+" fails Talos's validation", describeCall(c), c.At))
	}

	return out
}

// applyReplyLost: an ApplyConfiguration call failed without an answer, yet the
// node then left maintenance and no successful apply explains it: the config
// was applied and the reply lost (talos #8566). A failure that says nothing was
// applied (the call refused before it acted, a connection never made) is no
// such call, whatever happened next.
func applyReplyLost(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		applies := ev.calls(n.Name, "ApplyConfiguration")

		prev := time.Duration(-1)

		for _, left := range ev.Changes {
			if left.Node != n.Name || !left.LeftMaintenance {
				continue
			}

			if failed, ok := lostApply(ev, applies, prev, left.At); ok {
				out = append(out, diag("apply-reply-lost", n.Name,
					n.Name+" applied its configuration but the reply never reached the client",
					fmt.Sprintf("%s; then %s left maintenance at %s with no successful ApplyConfiguration to explain it",
						describeCall(failed), n.Name, ev.span(left.At)), failed.At))

				break
			}

			prev = left.At
		}
	}

	return out
}

// applySettle is how long after a node is seen leaving maintenance the reply of
// the call that made it leave may still be on its way to the client.
const applySettle = 2 * time.Second

// lostApply finds the call that must have made a node leave maintenance at
// `left` (ms), the previous leaving being at `prev`, when that call failed: the
// calls that ended since `prev`, and the one that was still in flight when the
// node was seen leaving (calls to one node are sequential, so that is the first
// to end after it, if it had started before; its recorded duration says so,
// however late a loaded machine let it end). A success among
// them explains the leaving; otherwise the last failure that may have acted is
// the call whose reply was lost.
func lostApply(ev *Evidence, applies []CallAt, prev, left time.Duration) (CallAt, bool) {
	var (
		candidate CallAt
		found     bool
	)

	consider := func(c CallAt) bool {
		if c.OK() {
			return false // a success explains the leaving
		}

		if c.Failure.MayHaveActed() {
			candidate, found = c, true
		}

		return true
	}

	for _, c := range applies {
		if c.At > prev && c.At <= left && !consider(c) {
			return CallAt{}, false
		}
	}

	for _, c := range applies {
		if c.At <= left {
			continue
		}

		// In flight when the node was seen leaving: started before, ended after.
		started := c.At - time.Duration(c.DurationMs)*time.Millisecond
		inFlight := started <= left
		if c.OK() && (inFlight || c.At-left <= applySettle) {
			return CallAt{}, false
		}

		if inFlight && !c.OK() && c.Failure.MayHaveActed() {
			candidate, found = c, true
		}

		break
	}

	return candidate, found
}
