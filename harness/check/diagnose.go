package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/target"
)

// Evidence is everything a diagnosis may draw on; all of it came through the
// Talos API (observations, machined logs) or from the orchestrator's own calls.
type Evidence struct {
	Nodes []target.Node
	Final *Observation
	// Logs returns a node's machined log lines.
	Logs func(node string) []LogLine
	// EtcdLogs returns the warnings and errors of a node's etcd log.
	EtcdLogs func(node string) []LogLine
	// LearnerSince reports when a member name was first seen as a learner.
	LearnerSince func(hostname string) (time.Duration, bool)
	// PromotedAt reports when a member name was seen promoted.
	PromotedAt func(hostname string) (time.Duration, bool)
	Events     []eventlog.Event
	// PromoteWindow is the Talos promote window in wall-clock time.
	PromoteWindow time.Duration
	// Now is the offset of the final observation.
	Now time.Duration
	// Scale is the run's time scale (Talos time / wall-clock time).
	Scale float64
}

// talosPromoteWindow is Talos's promote loop budget on every line (TALOS-FIDELITY.md §1).
const talosPromoteWindow = 10 * time.Minute

// talosTime prints a wall-clock duration of the run in Talos time.
func (ev *Evidence) talosTime(d time.Duration) string {
	if ev.Scale > 0 {
		d = time.Duration(float64(d) * ev.Scale)
	}

	return max(d, 0).Round(time.Second).String()
}

// talos converts a Talos-time duration to the run's wall-clock time.
func (ev *Evidence) talos(d time.Duration) time.Duration {
	if ev.Scale <= 0 {
		return d
	}

	return time.Duration(float64(d) / ev.Scale)
}

// rule produces the diagnoses of one code.
type rule func(ev *Evidence) []result.Diagnosis

// rules is the diagnosis vocabulary, one small function per code.
var rules = []rule{
	apiUnreachable,
	tooManyLearners,
	learnerNotPromoted,
	learnerPromotionPending,
	learnerNotSynced,
	staleLearner,
	nodeInMaintenance,
	tlsCertificateRequired,
	pkiMismatch,
	splitBrain,
	peerURLExists,
	configInvalid,
	applyReplyLost,
	noQuorum,
}

// Diagnose runs every rule.
func Diagnose(ev *Evidence) []result.Diagnosis {
	if ev.Logs == nil {
		ev.Logs = func(string) []LogLine { return nil }
	}

	if ev.EtcdLogs == nil {
		ev.EtcdLogs = func(string) []LogLine { return nil }
	}

	if ev.LearnerSince == nil {
		ev.LearnerSince = func(string) (time.Duration, bool) { return 0, false }
	}

	if ev.PromotedAt == nil {
		ev.PromotedAt = func(string) (time.Duration, bool) { return 0, false }
	}

	if ev.PromoteWindow <= 0 {
		ev.PromoteWindow = ev.talos(talosPromoteWindow)
	}

	out := []result.Diagnosis{}

	for _, r := range rules {
		out = append(out, r(ev)...)
	}

	return out
}

// firstLine finds the node's first log line containing substr.
func (ev *Evidence) firstLine(node, substr string) (LogLine, bool) {
	for _, l := range ev.Logs(node) {
		if strings.Contains(l.Text, substr) {
			return l, true
		}
	}

	return LogLine{}, false
}

// lastLine finds the node's last log line containing substr.
func (ev *Evidence) lastLine(node, substr string) (LogLine, bool) {
	lines := ev.Logs(node)

	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i].Text, substr) {
			return lines[i], true
		}
	}

	return LogLine{}, false
}

// events returns the events of the given kind prefix whose message contains substr.
func (ev *Evidence) events(kindPrefix, substr string) []eventlog.Event {
	var out []eventlog.Event

	for _, e := range ev.Events {
		if strings.HasPrefix(e.Kind, kindPrefix) && strings.Contains(e.Msg, substr) {
			out = append(out, e)
		}
	}

	return out
}

// nodeOfMember finds the examined node that holds an etcd member: by name, or
// by the address in its peer URLs.
func (ev *Evidence) nodeOfMember(m Member) *NodeObservation {
	for _, n := range ev.Final.Ordered() {
		if m.Hostname != "" && m.Hostname == n.Name {
			return n
		}
	}

	for _, n := range ev.Final.Ordered() {
		for _, u := range m.PeerURLs {
			if hostOf(u) == n.Address {
				return n
			}
		}
	}

	return nil
}

func (ev *Evidence) controlPlanes() []*NodeObservation {
	var out []*NodeObservation

	for _, n := range ev.Final.Ordered() {
		if n.Role == target.ControlPlane {
			out = append(out, n)
		}
	}

	return out
}

func diag(code, node, msg, evidence string, at time.Duration) result.Diagnosis {
	return result.Diagnosis{Code: code, Node: node, Message: msg, Evidence: evidence, TMs: at.Milliseconds()}
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func contains(list []string, s string) bool { return slices.Contains(list, s) }
