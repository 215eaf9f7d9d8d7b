package judge

import (
	"fmt"
	"time"

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
// down after it and came back (or showed a new boot ID), and it reports the
// version it started with.
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

		// A reboot shorter than a poll is never seen down: its boot ID
		// changed.
		var rebooted time.Duration = -1

		for _, at := range ev.Reboots[n.Name] {
			if at >= acked.At {
				rebooted = at

				break
			}
		}

		var how string

		switch {
		case back != nil:
			how = fmt.Sprintf("the node %s at %s, back at %s", down.To, ev.span(down.At), ev.span(back.At))
		case rebooted >= 0:
			how = fmt.Sprintf("the node was seen with a new boot ID at %s", ev.span(rebooted))
		default:
			continue
		}

		out = append(out, diag("upgrade-lost", n.Name,
			fmt.Sprintf("%s acknowledged its upgrade but came back on %s: it went down before its installer finished, and a node boots the version it has installed", n.Name, first),
			fmt.Sprintf("%s at %s; %s, still on %s", describeCall(*acked), ev.span(acked.At), how, n.Version), acked.At))
	}

	return out
}
