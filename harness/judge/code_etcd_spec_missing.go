package judge

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "etcd-spec-missing",
	Doc: "a control plane's etcd service waits for its etcd spec and never gets one: none of the node's addresses " +
		"is in cluster.etcd.advertisedSubnets (or listenSubnets), so Talos writes no spec, and says nothing",
	Diagnose: etcdSpecMissing,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s get addresses   # the node's addresses", r.Addr),
			fmt.Sprintf("talosctl -n %s get machineconfig -o yaml | grep -A3 -E 'advertisedSubnets|listenSubnets'   # must include one of them", r.Addr),
			fmt.Sprintf("talosctl -n %s get etcdspec   # absent while none matches", r.Addr),
		}
	},
})

// specWaitFloor is how long a wait for the etcd spec alone must have lasted
// (Talos time) to count: on a booting node the spec follows the network's
// readiness within seconds.
const specWaitFloor = 2 * time.Minute

// etcdSpecMissing: at the end, a node's etcd service has waited for its etcd
// spec alone for longer than specWaitFloor. EtcdSpecController writes no
// spec when the advertised (or listen) subnets match none of the node's
// addresses (controllers/etcd/spec.go), and logs nothing: the service waits
// for good without an error, the silent failure of a typo in one node's
// patch.
func etcdSpecMissing(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, node := range slices.Sorted(maps.Keys(ev.SpecWaiting)) {
		since := ev.SpecWaiting[node]

		n, ok := ev.Final.Nodes[node]
		if !ok || ev.Clock.Talos(ev.Now-since) < specWaitFloor {
			continue
		}

		addrs, subnets := n.Address, "cluster.etcd.advertisedSubnets or listenSubnets"

		if in := n.EtcdSpec; in != nil {
			addrs = strings.Join(in.Addresses, ", ")
			subnets = fmt.Sprintf("cluster.etcd.advertisedSubnets %v or listenSubnets %v", in.AdvertisedSubnets, in.ListenSubnets)
		}

		out = append(out, diag("etcd-spec-missing", node,
			fmt.Sprintf("%s's etcd waits for its etcd spec, which Talos never writes: none of its addresses (%s) is in %s", node, addrs, subnets),
			fmt.Sprintf("service etcd: Waiting (%q) since %s Talos into the run, with no error", n.Etcd.Message, ev.Clock.TalosString(since)), ev.Now))
	}

	return out
}
