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
	Name: "time-not-synced",
	Doc: "a node's time never synced: Talos holds its etcd and kubelet (\"Waiting for time sync\") and refuses Bootstrap " +
		"(\"time is not in sync yet\") until a time server answers, or machine.time.bootTimeout has passed",
	Diagnose: timeNotSynced,
	Remedy: func(r RemedyFor) []string {
		return []string{
			fmt.Sprintf("talosctl -n %s get timestatus   # SYNCED false", r.Addr),
			fmt.Sprintf("talosctl -n %s time   # does it reach its time server? (UDP 123)", r.Addr),
			"# let it reach a time server (machine.time.servers), or set machine.time.bootTimeout so that it goes on without one:",
			fmt.Sprintf("talosctl -n %s patch machineconfig --patch '{\"machine\": {\"time\": {\"bootTimeout\": \"2m\"}}}'", r.Addr),
		}
	},
})

// timeWaitFloor is how long a service must have waited for the time sync
// (Talos time) to count: a time server that answers does within seconds.
const timeWaitFloor = 2 * time.Minute

// timeNotSynced: at the end, a node's etcd or kubelet has waited for the
// time sync longer than timeWaitFloor, or the last Bootstrap it was asked
// for was refused for it (talos #6493, #6818, #4224). Talos gates etcd and
// kubelet on the time sync condition (services/etcd.go, kubelet.go) and
// Bootstrap waits 5 s on it (v1alpha1_server.go); with
// machine.time.bootTimeout unset the wait is forever (controllers/time/sync.go).
func timeNotSynced(ev *Evidence) []result.Diagnosis {
	var out []result.Diagnosis

	for _, node := range slices.Sorted(maps.Keys(ev.Final.Nodes)) {
		var evidence []string

		at := ev.Now

		if w, ok := ev.TimeWaiting[node]; ok && ev.Clock.Talos(ev.Now-w.At) >= timeWaitFloor {
			evidence = append(evidence, fmt.Sprintf("a service Waiting (%q) since %s Talos into the run", w.Message, ev.Clock.TalosString(w.At)))
			at = w.At
		}

		if last, n, ok := refusedForTime(ev, node); ok {
			evidence = append(evidence, fmt.Sprintf("%s (%d time(s), the last at %s)", describeCall(last), n, ev.span(last.At)))
			at = min(at, last.At)
		}

		if len(evidence) == 0 {
			continue
		}

		out = append(out, diag("time-not-synced", node,
			node+"'s time never synced: Talos holds its etcd and kubelet and refuses Bootstrap until a time server answers "+
				"(or machine.time.bootTimeout has passed since boot)",
			strings.Join(evidence, "; "), at))
	}

	return out
}

// timeRefusal is Bootstrap's answer while the time is not in sync
// (v1alpha1_server.go Bootstrap, after its 5 s wait).
const timeRefusal = "time is not in sync yet"

// refusedForTime is the node's last Bootstrap call when it was refused
// because the time was not in sync, and how many were.
func refusedForTime(ev *Evidence, node string) (CallAt, int, bool) {
	calls := ev.calls(node, "Bootstrap")
	if len(calls) == 0 {
		return CallAt{}, 0, false
	}

	last := calls[len(calls)-1]
	if last.Code != "FailedPrecondition" || last.Message != timeRefusal {
		return CallAt{}, 0, false
	}

	n := 0

	for _, c := range calls {
		if c.Code == "FailedPrecondition" && c.Message == timeRefusal {
			n++
		}
	}

	return last, n, true
}
