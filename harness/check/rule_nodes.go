package check

import (
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/eventlog"

	"github.com/talchaos/talchaos/harness/result"
)

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
// node left maintenance: the config was applied and the reply lost (talos #8566).
func applyReplyLost(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		var (
			failed *string
			at     int64
		)

		for _, e := range ev.Events {
			if e.Node != n.Name {
				continue
			}

			if e.Kind == "orchestrator.error" && strings.HasPrefix(e.Msg, "ApplyConfiguration "+n.Name+":") && ambiguous(e.Msg) {
				msg := e.Msg
				failed, at = &msg, e.TMs
			}

			if e.Kind == "node.left-maintenance" && failed != nil && e.TMs >= at-1000 {
				out = append(out, diag("apply-reply-lost", n.Name,
					n.Name+" applied its configuration but the reply never reached the client",
					fmt.Sprintf("%s; then %s left maintenance at %s", *failed, n.Name, seconds(msDuration(e.TMs))), msDuration(at)))

				failed = nil

				break
			}
		}
	}

	return out
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
