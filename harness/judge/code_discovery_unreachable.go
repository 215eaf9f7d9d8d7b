package judge

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

var _ = register(Code{
	Name: "discovery-unreachable",
	Doc: "a control plane cannot reach the cluster discovery service (\"hello failed\"): it discovers no other control plane, " +
		"so its etcd, which joins through the control planes it discovered, has nobody to join through",
	Diagnose: discoveryUnreachable,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s get members   # only itself", r.Addr),
			fmt.Sprintf("talosctl -n %s logs controller-runtime | grep 'hello failed'", r.Addr),
			"# let it reach the discovery service (cluster.discovery.registries.service.endpoint, TCP 443 out, or through a proxy),",
			"# or run one it can reach (siderolabs/discovery-service) and point cluster.discovery.registries.service.endpoint at it",
		}
	},
})

// helloFailed starts DiscoveryServiceController's log line for a hello the
// discovery service did not answer (siderolabs/discovery-client
// pkg/client/client.go, as machined's console prints it).
const helloFailed = `hello failed {"component": "controller-runtime", "controller": "cluster.DiscoveryServiceController"`

// helloStale is how long after a node's last "hello failed" it counts as
// having reached the service again (Talos time): the client retries at
// most a minute apart, ±50 % (cenkalti/backoff's defaults).
const helloStale = 2 * time.Minute

// discoveryUnreachable: at the end, a control plane's etcd is not running
// and its discovery client still fails its hellos (talos #10136, #10222).
// Talos joins etcd through the control-plane endpoints its discovery found
// (etcd.GetEndpoints over its Members, services/etcd.go addMember): a node
// cut off from the service knows only itself, where no etcd answers, and its
// join attempts time out until the service answers again.
func discoveryUnreachable(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		if n.Role != target.ControlPlane || n.Etcd.Running() {
			continue
		}

		var hellos []LogLine

		for _, l := range ev.Logs(n.Name) {
			if strings.HasPrefix(l.Text, helloFailed) {
				hellos = append(hellos, l)
			}
		}

		if len(hellos) == 0 {
			continue
		}

		last := hellos[len(hellos)-1]
		if ev.Clock.Talos(ev.Now-last.At) > helloStale {
			continue
		}

		evidence := []string{fmt.Sprintf("%d \"hello failed\" line(s) in its machined log from %s to %s, the last: %s",
			len(hellos), ev.span(hellos[0].At), ev.span(last.At), last.Text)}

		if n.Etcd != nil {
			evidence = append(evidence, fmt.Sprintf("service etcd: %s (%q) at the end", n.Etcd.State, n.Etcd.Message))
		}

		if r, ok := ev.lastLine(n.Name, "retrying error: "); ok {
			evidence = append(evidence, fmt.Sprintf("its join's last new error at %s: %s", ev.span(r.At), r.Text))
		}

		out = append(out, diag("discovery-unreachable", n.Name,
			n.Name+" cannot reach the cluster discovery service: its etcd joins only through the control planes it discovered before "+
				"(itself alone, if it never reached the service), where no voter answers",
			strings.Join(slices.Clip(evidence), "; "), hellos[0].At))
	}

	return out
}
