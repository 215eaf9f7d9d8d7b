package judge

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

var _ = register(Code{
	Name: "upgrade-refused",
	Doc: "a node's Upgrade was refused by its etcd checks (a member not started or not healthy, two members, " +
		"the upgrade mutex held) and it was never upgraded: a rolling upgrade that gives up at a refusal stops there",
	Diagnose: upgradeRefused,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s etcd status   # every member must be started and healthy", r.Addr),
			fmt.Sprintf("talosctl -n %s upgrade --image IMAGE   # again, once they are (the checks are the upgrade's own)", r.Addr),
		}
	},
})

// upgradeChecks are the texts of Upgrade's refusals by its etcd checks
// (v1alpha1_server.go Upgrade, internal/pkg/etcd ValidateForUpgrade).
var upgradeChecks = []string{"error validating etcd for upgrade: ", "failed to acquire upgrade mutex: "}

// memberInRefusal is the member ID a refusal names.
var memberInRefusal = regexp.MustCompile(`etcd member ([0-9a-f]{16}) is not`)

// upgradeRefused: a node's Upgrade calls were refused by the etcd checks and
// the node runs the version it started with at the end. The refusal names a
// member by ID; the diagnosis names its node when the final member list has
// it.
func upgradeRefused(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, r := range ev.refusedUpgrades(func(msg string) bool {
		return slices.ContainsFunc(upgradeChecks, func(prefix string) bool { return strings.HasPrefix(msg, prefix) })
	}) {
		n, last, refused := r.node, r.last, r.count

		why := strings.TrimPrefix(strings.TrimPrefix(last.Message, upgradeChecks[0]), upgradeChecks[1])

		if m := memberInRefusal.FindStringSubmatch(last.Message); m != nil {
			for _, mem := range ev.Final.Main().Members {
				if mem.IDString() == m[1] && mem.Hostname != "" {
					why += fmt.Sprintf(" (member %s is %s)", m[1], mem.Hostname)
				}
			}
		}

		out = append(out, diag("upgrade-refused", n.Name,
			n.Name+"'s upgrade was refused and it was never upgraded: "+why,
			fmt.Sprintf("%d Upgrade call(s) refused by the etcd checks, the last at %s: %s", refused, ev.span(last.At), describeCall(*last)), last.At))
	}

	return out
}

// refusedUpgrade is a node not upgraded at the end whose Upgrade calls since
// its last accepted one were refused: the last of them and how many.
type refusedUpgrade struct {
	node  *history.NodeObservation
	last  *CallAt
	count int
}

// refusedUpgrades are the nodes not upgraded at the end whose Upgrade calls
// since their last accepted one were refused as match says, in order.
func (ev *Evidence) refusedUpgrades(match func(msg string) bool) []refusedUpgrade {
	var out []refusedUpgrade

	upgraded := ev.upgradedSet()

	for _, n := range ev.Final.Ordered() {
		if upgraded[n.Name] {
			continue
		}

		r := refusedUpgrade{node: n}

		for _, c := range ev.calls(n.Name, "Upgrade") {
			switch {
			case c.OK():
				r.last, r.count = nil, 0
			case match(c.Message):
				r.count++
				r.last = &c
			}
		}

		if r.last != nil {
			out = append(out, r)
		}
	}

	return out
}
