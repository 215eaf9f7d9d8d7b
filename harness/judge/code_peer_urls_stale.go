package judge

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "peer-urls-stale",
	Doc: "a control plane's etcd member has peer URLs on an address its node no longer advertises, and Talos " +
		"cannot move them: changing a member's peer URLs needs a quorum, which the stale URLs took away",
	Diagnose: peerURLsStale,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s get addresses   # the node's addresses now", r.Addr),
			fmt.Sprintf("talosctl -n %s etcd members   # the peer URLs its peers dial", r.Addr),
			"# give enough control planes their old addresses back for a quorum; Talos then moves each member " +
				"(\"updated etcd peer URLs\"); move the nodes one at a time, or advertise both networks first " +
				"(cluster.etcd.advertisedSubnets) (talos #12720)",
			fmt.Sprintf("talosctl -n %s etcd snapshot db.snapshot   # without the old addresses: recover from a snapshot, "+
				"then talosctl bootstrap --recover-from=./db.snapshot", r.Addr),
		}
	},
})

// advertisedPeerFailed is how machined logs a failure of Talos's
// etcd.AdvertisedPeerController (controllers/etcd/advertised_peer.go, through
// controller-runtime's "controller failed"); advertisedPeerUpdated, its
// success.
const (
	advertisedPeerFailed  = `"controller": "etcd.AdvertisedPeerController", "error": "error updating advertised peers: `
	advertisedPeerUpdated = "updated etcd peer URLs"
)

// peerURLsStale: at the end a control plane's etcd runs without a quorum,
// and its Talos last failed to move its member's peer URLs to its etcd
// spec's addresses (the AdvertisedPeerController runs when the spec changes,
// while etcd is still healthy; its MemberUpdate, even its member list, needs
// a quorum). The node's advertised address changed under a running member
// (talos #12720, #9075: control planes re-addressed all at once): its peers
// dial the peer URLs etcd holds, which name an address gone, and the change
// that would mend them cannot be agreed.
func peerURLsStale(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.controlPlanes() {
		if n.Etcd == nil || n.Etcd.State != "Running" || n.Etcd.HealthUnknown || n.Etcd.Healthy {
			continue
		}

		failed, ok := ev.lastLine(n.Name, advertisedPeerFailed)
		if !ok {
			continue
		}

		if updated, ok := ev.lastLine(n.Name, advertisedPeerUpdated); ok && updated.At > failed.At {
			continue
		}

		urls := ev.LastMember[n.Name].PeerURLs

		at := "at its peer URLs"
		if len(urls) > 0 {
			at = "at " + strings.Join(urls, ", ")
		}

		evidence := n.Name + ": " + failureOf(failed.Text)
		if dial, ok := ev.peerDialFailure(n.Name, urls); ok {
			evidence += "; " + dial
		}

		out = append(out, diag("peer-urls-stale", n.Name,
			fmt.Sprintf("%s's etcd member is %s, which its Talos no longer advertises, and Talos cannot move it: "+
				"changing a member's peer URLs needs a quorum, and its peers cannot reach it there", n.Name, at),
			evidence, failed.At))
	}

	return out
}

// failureOf is the error of a controller-runtime "controller failed" line,
// whose fields machined prints as a JSON object after the message; the
// whole line when they do not parse.
func failureOf(line string) string {
	var fields struct {
		Error string `json:"error"`
	}

	if i := strings.Index(line, "{"); i >= 0 && json.Unmarshal([]byte(line[i:]), &fields) == nil && fields.Error != "" {
		return fields.Error
	}

	return line
}

// peerDialFailure is another control plane's etcd failing to dial one of the
// node's peer URLs (rafthttp's prober, its version check), as evidence.
func (ev *Evidence) peerDialFailure(node string, urls []string) (string, bool) {
	for _, o := range ev.controlPlanes() {
		if o.Name == node {
			continue
		}

		for _, l := range ev.EtcdLogs(o.Name) {
			for _, u := range urls {
				if host := strings.TrimPrefix(u, "https://"); host != u && strings.Contains(l.Text, history.DialText+host) {
					return o.Name + " etcd: " + etcdSummary(l.Text), true
				}
			}
		}
	}

	return "", false
}
