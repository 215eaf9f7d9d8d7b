package judge

import (
	"fmt"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

var _ = register(Code{
	Name: "duplicate-hostname",
	Doc: "two control planes have one hostname: Talos names a node's etcd member by its hostname and, joining, first removes " +
		"any member of its own name, so each join removes the other node's member and that node's etcd crash-loops on its data",
	Diagnose: duplicateHostname,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s get hostname   # every control plane needs a hostname of its own", r.Addr),
			"# give it one (a HostnameConfig document's hostname, or machine.network.hostname), then wipe its etcd data so it joins afresh:",
			ResetCommand(r.Addr),
		}
	},
})

// duplicateHostname: at the end, two or more control planes have one
// hostname, and one of them has no member in the main cluster. A joining
// node removes every member named as it is before it adds itself
// (internal/app/machined/pkg/system/services/etcd.go addMember: "here we
// assume that control plane nodes have unique hostnames"), so the last to
// join holds the name and the others' etcd exits on data the cluster has
// removed (siderolabs/talos#9145: nodes that came up with one hostname).
func duplicateHostname(ev *Evidence) []result.Diagnosis {
	byName := map[string][]*history.NodeObservation{}

	for _, n := range ev.Final.Ordered() {
		if n.Role == target.ControlPlane {
			byName[n.EtcdName()] = append(byName[n.EtcdName()], n)
		}
	}

	main := ev.Final.Main()

	// By peer URL alone: the name cannot tell the nodes apart.
	memberOf := func(n *history.NodeObservation) (history.Member, bool) { return main.Member("", n.AllAddresses()...) }

	var out []result.Diagnosis

	for _, n := range ev.Final.Ordered() {
		name, same := n.EtcdName(), byName[n.EtcdName()]
		if n.Role != target.ControlPlane || len(same) < 2 {
			continue
		}

		if _, ok := memberOf(n); ok {
			continue
		}

		var others []string

		holder, holderURLs := "", ""

		for _, o := range same {
			if o == n {
				continue
			}

			others = append(others, o.Name)

			if m, ok := memberOf(o); ok && m.Hostname == name {
				holder, holderURLs = o.Name, strings.Join(m.PeerURLs, ", ")
			}
		}

		sharing := strings.Join(append([]string{n.Name}, others...), ", ")
		summary := fmt.Sprintf("%s has the hostname of %s (%q): a join of one removed the etcd member of the other, as Talos removes any member of a joining node's name",
			n.Name, strings.Join(others, " and "), name)
		evidence := fmt.Sprintf("control planes %s have the hostname %q; no member is %s's", sharing, name, n.Name)

		if holder != "" {
			summary = fmt.Sprintf("%s has the hostname of %s (%q): %s's join removed %s's etcd member, as Talos removes any member of a joining node's name",
				n.Name, strings.Join(others, " and "), name, holder, n.Name)
			evidence = fmt.Sprintf("control planes %s have the hostname %q; etcd's member %q is %s's (peer URLs %s), none is %s's",
				sharing, name, name, holder, holderURLs, n.Name)
		}

		if n.Etcd != nil {
			evidence += fmt.Sprintf("; its etcd service is %s", n.Etcd.State)
		}

		out = append(out, diag("duplicate-hostname", n.Name, summary, evidence, ev.Now))
	}

	return out
}
