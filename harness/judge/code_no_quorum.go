package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

var _ = register(Code{
	Name:     "no-quorum",
	Doc:      "control planes run etcd, and none of them can complete a linearizable read",
	Diagnose: noQuorum,
	Remedy: func(r RemedyFor) []string {
		// The snapshot comes from a member still running (the diagnosis
		// names no node: it is the cluster's).
		at := "<a control plane whose etcd runs>"

		for _, n := range r.Final.Ordered() {
			if n.Role == target.ControlPlane && n.Mode == history.ModeConfigured && n.Etcd != nil && n.Etcd.State == "Running" {
				at = n.Address

				break
			}
		}

		return []string{"# bring the missing members back; if they are lost for good, restore from a snapshot:",
			fmt.Sprintf("talosctl -n %s etcd snapshot db.snapshot", at),
			fmt.Sprintf("talosctl -n %s bootstrap --recover-from=./db.snapshot", at)}
	},
})

// noQuorum: control planes with etcd running, none of them able to complete a
// linearizable read.
func noQuorum(ev *Evidence) []result.Diagnosis {
	var (
		running, failing int
		evidence         string
	)

	for _, n := range ev.controlPlanes() {
		if n.Etcd == nil || n.Etcd.State != "Running" || (n.Status != nil && n.Status.IsLearner) {
			continue
		}

		running++

		if !n.Etcd.HealthUnknown && !n.Etcd.Healthy {
			failing++
			evidence = n.Name + ": Health check failed: " + n.Etcd.HealthMessage
		}
	}

	if running == 0 || failing < running {
		return nil
	}

	return []result.Diagnosis{diag("no-quorum", "", fmt.Sprintf("none of the %d running etcd voting members can reach quorum", running), evidence, ev.Now)}
}
