package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

var _ = register(Code{
	Name: "bootstrap-unreached",
	Doc: "no Bootstrap call reached a node (each failed before a connection: no route to host, refused, a dial timeout), " +
		"so no etcd cluster exists; through a shared IP (VIP) it never can, since Talos elects the VIP's holder through etcd",
	Diagnose: bootstrapUnreached,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -e %s -n %s bootstrap   # the node itself: a VIP comes up only once etcd runs", r.Addr, r.Addr),
			"# keep the VIP out of the talosconfig's endpoints: it is bound to etcd's health (Talos's VIP docs, \"Caveats\")",
		}
	},
})

// bootstrapUnreached: at the end no node reports an etcd member list (no
// cluster was ever formed), a control plane left maintenance, and Bootstrap
// was asked for, but every Bootstrap call failed without a connection to a
// node (history.FailureNoConnection): the bootstrap never reached Talos. The
// field's case is a script that bootstraps through the cluster's VIP
// (cozystack/talos-bootstrap#30): Talos's VIP operator campaigns for the
// shared IP through etcd (controllers/network/operator/vip.go), so before the
// bootstrap no node holds it and nothing answers there.
func bootstrapUnreached(ev *Evidence) []result.Diagnosis {
	configured := false

	for _, n := range ev.Final.Ordered() {
		if len(n.Members) > 0 {
			return nil
		}

		configured = configured || n.Role == target.ControlPlane && n.Mode == history.ModeConfigured
	}

	if !configured {
		return nil
	}

	var (
		last  *CallAt
		count int
	)

	for _, node := range ev.Final.Ordered() {
		for _, c := range ev.calls(node.Name, "Bootstrap") {
			if c.Failure != history.FailureNoConnection {
				return nil
			}

			count++

			if last == nil || c.At > last.At {
				last = &c
			}
		}
	}

	if last == nil {
		return nil
	}

	return []result.Diagnosis{diag("bootstrap-unreached", last.Node,
		"no Bootstrap call reached "+last.Node+": each failed before a connection, so no etcd cluster exists and every control plane's etcd waits to be bootstrapped",
		fmt.Sprintf("%d Bootstrap call(s), none connected; the last at %s: %s; no node reports an etcd member",
			count, ev.span(last.At), describeCall(*last)), last.At)}
}
