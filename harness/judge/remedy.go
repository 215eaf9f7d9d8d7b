package judge

import (
	"fmt"
	"slices"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

// Remedy is the commands that fix a diagnosis (talosctl, as an operator types them).
func Remedy(d result.Diagnosis, obs *history.Observation) []string {
	main := obs.Main()
	voter := ""

	for _, n := range obs.Ordered() {
		if m, ok := main.Member(n.Name, n.Address); ok && !m.IsLearner && n.Mode == history.ModeConfigured {
			voter = n.Address

			break
		}
	}

	if voter == "" {
		voter = "<a voting member>"
	}

	learner := func(pred func(history.Member) bool) []string {
		var out []string

		for _, m := range main.Members {
			if m.IsLearner && pred(m) {
				out = append(out, fmt.Sprintf("talosctl -n %s etcd remove-member %s", voter, m.IDString()))
			}
		}

		return out
	}

	addr := d.Node
	if n := obs.Nodes[d.Node]; n != nil {
		addr = n.Address
	}

	ownLearner := func(m history.Member) bool {
		return m.Hostname == d.Node || slices.Contains(m.PeerURLs, "https://"+addr+":2380")
	}

	switch d.Code {
	case "api-unreachable":
		return []string{"# is the machine powered on, booted and on the network? check its console, BMC or hypervisor",
			fmt.Sprintf("talosctl -n %s version   # 'connection refused': the machine is up but apid is not listening; a timeout: the address is unreachable", addr)}
	case "learner-promotion-pending":
		return append([]string{"# wait: Talos retries the promotion until its promote window ends, then never again",
			fmt.Sprintf("talosctl -n %s etcd status   # a learner far behind the leader's raft index is refused promotion", addr),
			fmt.Sprintf("talosctl -n %s logs machined   # the promote loop's 'retrying error:' lines", addr),
			"# if it is still a learner when the window has passed, it never will be:"},
			remedyComment(append(learner(ownLearner), resetCommand(addr)))...)
	case "too-many-learners":
		return append(learner(func(history.Member) bool { return true }),
			"# then wait: "+addr+"'s join loop adds it as the next learner")
	case "stale-learner", "peer-url-exists":
		return learner(func(m history.Member) bool { return m.Hostname == "" })
	case "learner-not-promoted":
		return append(learner(ownLearner), resetCommand(addr))
	case "learner-not-synced":
		return []string{"# wait while it catches up, and check the network between " + addr + " and the etcd leader",
			fmt.Sprintf("talosctl -n %s etcd status", addr)}
	case "node-in-maintenance":
		return []string{fmt.Sprintf("talosctl apply-config --insecure -n %s -f <the node's machine config>", addr)}
	case "tls-certificate-required":
		return []string{fmt.Sprintf("talosctl --talosconfig <talosconfig> -n %s version   # the node has a config: use the talosconfig, not --insecure", addr)}
	case "pki-mismatch":
		return []string{"# use the talosconfig generated from the same secrets as the nodes' configs:",
			"talosctl gen config --with-secrets secrets.yaml <cluster> <endpoint>   # never --force a new one",
			fmt.Sprintf("# or reset the node and apply a matching config: talosctl -n %s reset", addr)}
	case "split-brain":
		return []string{fmt.Sprintf("talosctl -n %s reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false   # its etcd data is lost; it joins the main cluster", addr)}
	case "config-invalid":
		return []string{"talosctl validate --config <the node's machine config> --mode metal"}
	case "apply-reply-lost":
		return []string{fmt.Sprintf("talosctl -n %s version   # the config is applied: do not re-apply with --insecure", addr)}
	case "etcd-failed":
		return []string{fmt.Sprintf("talosctl -n %s reboot   # etcd starts again on the next boot; a stopped etcd cannot be started through the API", addr)}
	case "etcd-crash-loop":
		return append(learner(ownLearner), resetCommand(addr))
	case "no-quorum":
		return []string{"# bring the missing members back; if they are lost for good, restore from a snapshot:",
			fmt.Sprintf("talosctl -n %s etcd snapshot db.snapshot", addr),
			fmt.Sprintf("talosctl -n %s bootstrap --recover-from=./db.snapshot", addr)}
	}

	return nil
}

// resetCommand wipes a node's etcd data and reboots it, so that it joins again.
func resetCommand(addr string) string {
	return fmt.Sprintf("talosctl -n %s reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false", addr)
}

// remedyComment turns commands into commented-out lines: what to run later, if needed.
func remedyComment(cmds []string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = "#   " + c
	}

	return out
}
