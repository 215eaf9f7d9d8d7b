package judge

import (
	"fmt"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "upgrade-lost",
	Doc: "a node acknowledged its upgrade, then went down before the installer finished and booted the version it had: " +
		"`talosctl upgrade` sees it reboot and be ready, and reports success",
	Diagnose: upgradeLost,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s version   # the Tag is the version it runs", r.Addr),
			fmt.Sprintf("talosctl -n %s upgrade --image IMAGE   # again: after an upgrade, check the version, not only that the node came back", r.Addr),
		}
	},
})

// upgradeLost: the node's last Upgrade call was acknowledged, the node went
// down after it and came back, and it reports the version it started with.
func upgradeLost(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	upgraded := ev.upgradedSet()

	for _, n := range ev.Final.Ordered() {
		first, looked := ev.FirstVersion[n.Name]
		if upgraded[n.Name] || !looked || n.Mode != history.ModeConfigured || n.Version != first {
			continue
		}

		var acked *CallAt

		for _, c := range ev.calls(n.Name, "Upgrade") {
			if c.OK() {
				acked = &c
			}
		}

		if acked == nil {
			continue
		}

		var down, back *ModeChange

		for _, c := range ev.Changes {
			if c.Node != n.Name || c.At < acked.At {
				continue
			}

			switch {
			case down == nil && c.To != history.ModeConfigured:
				down = &c
			case down != nil && c.To == history.ModeConfigured:
				back = &c
			}
		}

		if back == nil {
			continue
		}

		out = append(out, diag("upgrade-lost", n.Name,
			fmt.Sprintf("%s acknowledged its upgrade but came back on %s: it went down before its installer finished, and a node boots the version it has installed", n.Name, first),
			fmt.Sprintf("%s at %s; the node %s at %s, back at %s, still on %s", describeCall(*acked), ev.span(acked.At), down.To, ev.span(down.At), ev.span(back.At), n.Version), acked.At))
	}

	return out
}
