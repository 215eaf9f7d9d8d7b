package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"

	"github.com/talchaos/talchaos/harness/result"
)

// apiUnreachable: a node answers neither the talosconfig client nor the
// insecure one: powered off, rebooting for good, or cut off from the network.
// Nothing else can be learnt about it through the API.
func apiUnreachable(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	main := ev.Final.Main()

	for _, n := range ev.Final.Ordered() {
		if n.Mode != ModeDown {
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
		for _, e := range ev.Events {
			if e.Node == n.Name && e.Kind == "node.mode" && strings.Contains(e.Msg, "→ "+ModeDown) {
				at = msDuration(e.TMs)
			}
		}

		if at < ev.Now {
			msg += " (down since " + seconds(at) + ")"
		}

		out = append(out, diag("api-unreachable", n.Name, msg, n.APIError, at))
	}

	return out
}

// nodeInMaintenance: a node still answering the insecure maintenance API never
// got a valid config; it waits forever (seeds 001, 003).
func nodeInMaintenance(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		if n.Mode != ModeMaintenance {
			continue
		}

		evidence := "the insecure client is answered; the talosconfig client gets: " + n.APIError

		if errs := ev.events("orchestrator.error", "ApplyConfiguration "+n.Name+":"); len(errs) > 0 {
			last := errs[len(errs)-1]
			evidence = last.Msg + "; " + evidence
		}

		out = append(out, diag("node-in-maintenance", n.Name,
			n.Name+" is still in maintenance mode: it never received a valid configuration",
			evidence, ev.Now))
	}

	return out
}

// tlsCertificateRequired: a client without a certificate talked to a node that
// had already switched to mutual TLS (seed 004, talos #10185, #9241, #8442).
func tlsCertificateRequired(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	seen := map[string]bool{}

	for _, e := range ev.events("orchestrator.error", "tls: certificate required") {
		if seen[e.Node] {
			continue
		}

		seen[e.Node] = true

		out = append(out, diag("tls-certificate-required", e.Node,
			e.Node+" had left maintenance and requires a client certificate, but was called with the insecure (maintenance) client",
			e.Msg, msDuration(e.TMs)))
	}

	return out
}

// pkiMismatch: the node's API CA is not the talosconfig's (seed 001: talosconfig
// regenerated with --force).
func pkiMismatch(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		if n.Mode != ModePKIMismatch {
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
		if n.Mode != ModeConfigured {
			continue
		}

		var last *eventlog.Event

		for _, e := range ev.Events {
			if e.Node != n.Name {
				continue
			}

			switch {
			case e.Kind == "orchestrator.error" && strings.Contains(e.Msg, "certificate signed by unknown authority"):
				last = &e
			case e.Kind == "orchestrator.call" && !insecureCall(e.Msg):
				last = nil
			}
		}

		if last != nil {
			out = append(out, diag("pki-mismatch", n.Name,
				"the orchestrator's talosconfig is not trusted by "+n.Name+": it was generated from other secrets than the node's config",
				last.Msg, msDuration(last.TMs)))
		}
	}

	return out
}

// insecureCall reports whether an orchestrator call went through the maintenance client.
func insecureCall(msg string) bool {
	return strings.HasPrefix(msg, "ApplyConfiguration ") || strings.HasPrefix(msg, "Disks ")
}

// configInvalid: the node refused the config with InvalidArgument (seed 001).
func configInvalid(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	seen := map[string]bool{}

	for _, e := range ev.events("orchestrator.error", "code = InvalidArgument") {
		if seen[e.Node] {
			continue
		}

		seen[e.Node] = true

		out = append(out, diag("config-invalid", e.Node, "the machine configuration for "+e.Node+" fails Talos's validation", e.Msg, msDuration(e.TMs)))
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
		var applies, leavings []eventlog.Event

		for _, e := range ev.Events {
			switch {
			case e.Node != n.Name:
			case isApply(e, n.Name):
				applies = append(applies, e)
			case e.Kind == "node.left-maintenance":
				leavings = append(leavings, e)
			}
		}

		var prev int64 = -1

		for _, left := range leavings {
			if failed, ok := lostApply(ev, applies, prev, left.TMs); ok {
				out = append(out, diag("apply-reply-lost", n.Name,
					n.Name+" applied its configuration but the reply never reached the client",
					fmt.Sprintf("%s; then %s left maintenance at %s with no successful ApplyConfiguration to explain it",
						failed.Msg, n.Name, seconds(msDuration(left.TMs))), msDuration(failed.TMs)))

				break
			}

			prev = left.TMs
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
// to end after it, if it ended within a client's deadline). A success among
// them explains the leaving; otherwise the last failure that may have acted is
// the call whose reply was lost.
func lostApply(ev *Evidence, applies []eventlog.Event, prev, left int64) (eventlog.Event, bool) {
	var (
		candidate eventlog.Event
		found     bool
	)

	consider := func(e eventlog.Event) bool {
		if e.Kind == "orchestrator.call" {
			return false // a success explains the leaving
		}

		if mayHaveActed(e.Msg) {
			candidate, found = e, true
		}

		return true
	}

	for _, e := range applies {
		if e.TMs > prev && e.TMs <= left && !consider(e) {
			return eventlog.Event{}, false
		}
	}

	for _, e := range applies {
		if e.TMs <= left {
			continue
		}

		inFlight := msDuration(e.TMs-left) <= max(ev.talos(clientDeadline), minClientDeadline)
		if e.Kind == "orchestrator.call" && msDuration(e.TMs-left) <= applySettle {
			return eventlog.Event{}, false
		}

		if inFlight && e.Kind == "orchestrator.error" && mayHaveActed(e.Msg) {
			candidate, found = e, true
		}

		break
	}

	return candidate, found
}

// clientDeadline is how long (Talos time) a client waits for an apply reply, as
// the orchestrators and the Terraform provider do; minClientDeadline is the
// floor the orchestrators put under it when time is scaled.
const (
	clientDeadline    = 30 * time.Second
	minClientDeadline = 2 * time.Second
)

func isApply(e eventlog.Event, node string) bool {
	return (e.Kind == "orchestrator.error" || e.Kind == "orchestrator.call") && strings.HasPrefix(e.Msg, "ApplyConfiguration "+node+":")
}

// mayHaveActed reports whether a failed call may have had its effect: its error
// leaves it open whether the server acted (no answer came back), and it does not
// itself say that nothing was done.
func mayHaveActed(msg string) bool {
	return ambiguous(msg) && !nothingDone(msg)
}

// ambiguous reports whether a call error leaves it open whether the server acted.
func ambiguous(msg string) bool {
	for _, s := range []string{"code = DeadlineExceeded", "code = Unavailable", "code = Canceled", "context deadline exceeded", "connection reset", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}

	return false
}

// nothingDone reports whether a failure says the request never took effect: it
// was refused before it acted (an injected api-fail), or never reached the
// server's handler (no connection, a refused TLS handshake).
func nothingDone(msg string) bool {
	for _, s := range []string{
		"refused before it had any effect",
		"connection refused",
		"Error while dialing",
		"tls: certificate required",
		"certificate signed by unknown authority",
		"authentication handshake failed",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}

	return false
}
