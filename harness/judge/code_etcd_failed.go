package judge

import (
	"fmt"
	"maps"
	"slices"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name:     "etcd-failed",
	Doc:      "a node's etcd service is Failed (its join loop gave up, or its pre stage failed): Talos starts it again only on the next boot",
	Diagnose: etcdFailed,
	Remedy: func(r RemedyFor) []string {
		return []string{fmt.Sprintf("talosctl -n %s reboot   # etcd starts again on the next boot; a stopped etcd cannot be started through the API", r.Addr)}
	},
})

// etcdFailed: a node's etcd service went Failed — its join loop gave up
// after 30 minutes, or its pre stage failed. Talos does not start it again
// until the node boots again: 70 minutes into a boot that never completes
// (BootTimeout), or a reboot. A user's script waiting for voters waits in
// vain meanwhile.
func etcdFailed(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, node := range slices.Sorted(maps.Keys(ev.EtcdFailed)) {
		s := ev.EtcdFailed[node]

		out = append(out, diag("etcd-failed", node,
			node+"'s etcd service failed; Talos starts it again only when the node boots again (a reboot, or 70 minutes into a boot that never completes)",
			fmt.Sprintf("etcd Failed: %s (at %s)", s.Message, ev.Clock.TalosString(s.At)), ev.Now))
	}

	return out
}
