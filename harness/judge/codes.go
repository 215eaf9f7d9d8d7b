package judge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
)

// Code is one diagnosis code, as etcd's robustness failpoints are one type per
// failure: its stable name (a public vocabulary: scenario files and reports
// depend on it), what it means, how the evidence of a history shows it, and
// the talosctl commands that fix it.
//
// Each code is one file, code_<name>.go, that registers it: adding a code
// touches that file and its test, nothing else. The scenario validator
// (through chaos.Catalogue), the judge, `talchaos list`, the doctor and the
// docs read the one list, Codes.
type Code struct {
	// Name is the code ("too-many-learners").
	Name string
	// Doc says in one line what the diagnosis means.
	Doc string
	// Diagnose finds every occurrence in the evidence.
	Diagnose func(ev *Evidence) []result.Diagnosis
	// Remedy is the commands that fix one diagnosis of this code, as an
	// operator types them; nil when there is nothing to run.
	Remedy func(r RemedyFor) []string
}

// registered is filled as the package is initialised, by the codes' files;
// it is read only through Codes, never during initialisation.
var registered []Code

// register adds a code to the list; each code's file calls it once.
func register(c Code) Code {
	registered = append(registered, c)

	return c
}

// Codes is every diagnosis code, by name.
func Codes() []Code {
	return slices.SortedFunc(slices.Values(registered), func(a, b Code) int { return strings.Compare(a.Name, b.Name) })
}

// CodeNames lists the codes' names, sorted.
func CodeNames() []string {
	out := make([]string, 0, len(Codes()))
	for _, c := range Codes() {
		out = append(out, c.Name)
	}

	return out
}

// LookupCode finds a code by name.
func LookupCode(name string) (Code, bool) {
	i := slices.IndexFunc(registered, func(c Code) bool { return c.Name == name })
	if i < 0 {
		return Code{}, false
	}

	return registered[i], true
}

// Diagnose runs every code on the evidence of a history.
func Diagnose(ev *Evidence) []result.Diagnosis {
	if ev.PromoteWindow <= 0 {
		ev.PromoteWindow = ev.Clock.Wall(talosPromoteWindow)
	}

	out := []result.Diagnosis{}

	for _, c := range Codes() {
		out = append(out, c.Diagnose(ev)...)
	}

	return out
}

// RemedyFor is what a remedy is written from: the diagnosis, the last look at
// the nodes, the diagnosed node's address and a voting member's (where etcd
// calls go).
type RemedyFor struct {
	Diagnosis result.Diagnosis
	Final     *history.Observation
	// Addr is the diagnosed node's address (its name when it was not seen).
	Addr string
	// Voter is a configured voting member's address, or a placeholder.
	Voter string
}

// RemoveLearners is a remove-member command for every learner of the main
// cluster that pred picks.
func (r RemedyFor) RemoveLearners(pred func(history.Member) bool) []string {
	var out []string

	for _, m := range r.Final.Main().Members {
		if m.IsLearner && pred(m) {
			out = append(out, fmt.Sprintf("talosctl -n %s etcd remove-member %s", r.Voter, m.IDString()))
		}
	}

	return out
}

// OwnLearner reports whether m is the diagnosed node's member.
func (r RemedyFor) OwnLearner(m history.Member) bool {
	return r.Final.NodeOf(m) == r.Diagnosis.Node
}

// Remedy is the commands that fix a diagnosis (talosctl, as an operator types them).
func Remedy(d result.Diagnosis, obs *history.Observation) []string {
	c, ok := LookupCode(d.Code)
	if !ok || c.Remedy == nil {
		return nil
	}

	r := RemedyFor{Diagnosis: d, Final: obs, Addr: d.Node, Voter: "<a voting member>"}

	main := obs.Main()

	for _, n := range obs.Ordered() {
		if m, ok := main.MemberOf(n); ok && !m.IsLearner && n.Mode == history.ModeConfigured {
			r.Voter = n.Address

			break
		}
	}

	if n := obs.Nodes[d.Node]; n != nil {
		r.Addr = n.Address
	}

	return c.Remedy(r)
}

// ResetCommand wipes a node's etcd data and reboots it, so that it joins again.
func ResetCommand(addr string) string {
	return fmt.Sprintf("talosctl -n %s reset --system-labels-to-wipe EPHEMERAL --reboot --graceful=false", addr)
}

// remedyComment turns commands into commented-out lines: what to run later, if needed.
func remedyComment(cmds []string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = "#   " + c
	}

	return out
}
