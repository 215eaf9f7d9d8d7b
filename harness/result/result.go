// Package result holds the outcome of one run: what the report writers serialise.
// Its JSON form is the report.json contract (schema talchaos.report/v2,
// DESIGN.md); reports of schema v1 are still read.
package result

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/strictjson"
)

// Schema is the report schema identifier.
const Schema = "talchaos.report/v2"

// SchemaV1 is the schema of reports before v2, still readable: v2 only adds
// fields.
const SchemaV1 = "talchaos.report/v1"

// Verdicts.
const (
	Pass  = "pass"  // the scenario's expect block held
	Fail  = "fail"  // it did not
	Error = "error" // the harness could not run the scenario
)

// ClockFloor is one interval that lasted ModelledMs of Talos time in the run
// where a real node takes TalosMs.
type ClockFloor struct {
	What       string `json:"what"`
	TalosMs    int64  `json:"talosMs"`
	ModelledMs int64  `json:"modelledMs"`
}

// Result is one run of one scenario.
type Result struct {
	Schema   string `json:"schema"`
	Scenario string `json:"scenario"`
	File     string `json:"file,omitempty"`
	Target   string `json:"target"`
	Seed     int64  `json:"seed"`
	Talos    string `json:"talos"`
	// TimeScale is the scale the run used: the scenario's on simulated
	// nodes, the nodes' own on real ones (ScenarioTimeScale then differs).
	TimeScale         float64 `json:"timeScale,omitempty"`
	ScenarioTimeScale float64 `json:"scenarioTimeScale,omitempty"`
	// ClockFloors are the Talos-time intervals the target could not scale
	// all the way at TimeScale (simulated nodes: etcd's raft timers, call
	// deadlines): they last longer in Talos time than on a real node.
	ClockFloors []ClockFloor `json:"clockFloors,omitempty"`
	// Tool is the talchaos build that ran it.
	Tool        buildinfo.Info `json:"tool"`
	Description string         `json:"description,omitempty"`
	Reproduces  []string       `json:"reproduces,omitempty"`
	// Source is the scenario file as it was read, so the run can be judged
	// and replayed when the file has moved or changed.
	Source *Source `json:"source,omitempty"`
	// Schedule is the resolved fault schedule: every fault with the nodes
	// the seed chose, its own seed and every parameter.
	Schedule []Planned `json:"schedule"`
	Verdict  string    `json:"verdict"`
	Error    string    `json:"error,omitempty"`
	// Voided: the expectations failed across a stall of the host that ran
	// talchaos (the history's stall entries), so the verdict is error and
	// Error says why: the run says nothing of the cluster, and a count of
	// pass rates leaves it out.
	Voided bool `json:"voided,omitempty"`
	// Orchestrator is how the orchestrator ended; absent when the run
	// ended before it did (interrupted, or an error setting up).
	Orchestrator *OrchestratorEnd `json:"orchestrator,omitempty"`
	Outcome      Outcome          `json:"outcome"`
	Checks       []Check          `json:"checks"`
	Diagnoses    []Diagnosis      `json:"diagnoses"`
	Faults       []Fault          `json:"faults"`
	Events       []eventlog.Event `json:"events"`
	// History is the typed record of the run the verdict is derived from
	// (harness/judge); absent in v1 reports.
	History    *history.History `json:"history,omitempty"`
	StartedAt  string           `json:"startedAt"`
	DurationMs int64            `json:"durationMs"`
	Replay     string           `json:"replay"`
}

// OrchestratorEnd is how the orchestrator ended: with an error or not, and
// for the exec orchestrator the command's exit code, or that it was still
// running when its time (orchestrator.timeout, else expect.within) was up
// and was killed.
type OrchestratorEnd struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
	// ExitCode is the exec command's exit status; absent when it did not
	// exit by itself (killed, or never started).
	ExitCode *int `json:"exitCode,omitempty"`
	// TimedOut: its time was up before it returned.
	TimedOut bool `json:"timedOut,omitempty"`
}

// Source is a scenario file's content and its sha256 (hex).
type Source struct {
	Path    string `json:"path"`
	SHA256  string `json:"sha256"`
	Content string `json:"content"`
}

// Planned is one fault as the run resolved it before starting.
type Planned struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Nodes   []string `json:"nodes,omitempty"`
	Trigger string   `json:"trigger"`
	// Seed is the fault's own random stream (a latency's jitter).
	Seed uint64 `json:"seed"`
	// Params are the kind's parameters by their scenario names, resolved
	// ("random" replaced by the node chosen).
	Params map[string]any `json:"params"`
}

// Outcome is the final observed state of the cluster.
type Outcome struct {
	// Converged: the cluster formed and stayed formed for the scenario's
	// stable period (expect.stable) up to the end of the run.
	Converged bool `json:"converged"`
	// ConvergedFor is how long (Talos time) it had been converged at the end.
	ConvergedFor       string   `json:"convergedFor,omitempty"`
	Voters             int      `json:"voters"`
	Learners           int      `json:"learners"`
	NodesInMaintenance []string `json:"nodesInMaintenance"`
	// Members is the final member list as the nodes report it (name or "(unstarted)", learner flag).
	Members []Member `json:"members,omitempty"`
	// Nodes is the final per-node view.
	Nodes []NodeOutcome `json:"nodes,omitempty"`
	// Promotions are the learners seen during the run and when they were promoted.
	Promotions []Promotion `json:"promotions,omitempty"`
	// KubernetesEndpoints is how many addresses the kubernetes endpoints
	// list at the end (runs with Kubernetes; 0 when no API server was ready).
	KubernetesEndpoints *int `json:"kubernetesEndpoints,omitempty"`
	// NodesReady is how many Kubernetes Nodes are Ready at the end (runs
	// with Kubernetes; 0 when no API server was ready to list them).
	NodesReady *int `json:"nodesReady,omitempty"`
	// Upgraded is how many nodes report another Talos version at the end
	// than when first seen (runs with a rolling upgrade).
	Upgraded *int `json:"upgraded,omitempty"`
	// SharedIP is the shared IP (VIP) the control planes' configs give, and
	// who held it at the end; absent when no answering control plane's
	// config gives one.
	SharedIP *SharedIP `json:"sharedIP,omitempty"`
}

// SharedIP is a cluster's shared IP at the end of a run: Holder is the
// control plane that held it, empty when none did; Error what the
// talosconfig client got through it from the holder's Talos API, empty when
// it answered.
type SharedIP struct {
	Address string `json:"address"`
	Holder  string `json:"holder,omitempty"`
	Error   string `json:"error,omitempty"`
}

// State is how the check `sharedIP` reads the shared IP: "held" or
// "unheld".
func (s *SharedIP) State() string {
	if s.Holder == "" {
		return SharedIPUnheld
	}

	return SharedIPHeld
}

// Is reports whether the shared IP is as expect.sharedIP's state says:
// unheld, no control plane holds it; held, one does and its Talos API
// answers there (a client whose only endpoint is the VIP reaches it).
func (s *SharedIP) Is(state string) bool {
	return s.State() == state && (state != SharedIPHeld || s.Error == "")
}

// The states of a shared IP that expect.sharedIP names.
const (
	SharedIPHeld   = "held"
	SharedIPUnheld = "unheld"
)

// Promotion is one member's time as a learner: a node removed and joined
// again has a row for each of its members. PromotedMs is -1 when it never
// was; RemovedMs, when it is not 0, is when the member was seen gone from
// the cluster before a promotion.
type Promotion struct {
	Node string `json:"node"`
	// Member is the member's ID as talosctl prints it (older reports,
	// a row a node, have none).
	Member     string `json:"member,omitempty"`
	LearnerMs  int64  `json:"learnerMs"`
	PromotedMs int64  `json:"promotedMs"`
	RemovedMs  int64  `json:"removedMs,omitempty"`
	// WaitTalos is the wait in Talos time (wall time × time scale), e.g. "45s".
	WaitTalos string `json:"waitTalos,omitempty"`
}

// Member is one etcd member in the final state.
type Member struct {
	ID        string   `json:"id"`
	Hostname  string   `json:"hostname"`
	PeerURLs  []string `json:"peerURLs"`
	IsLearner bool     `json:"isLearner"`
}

// NodeOutcome is one node's final state as seen through its Talos API.
type NodeOutcome struct {
	Name        string `json:"name"`
	Address     string `json:"address"`
	Role        string `json:"role"`
	Stage       string `json:"stage"`
	EtcdState   string `json:"etcdState,omitempty"`
	EtcdMessage string `json:"etcdMessage,omitempty"`
	EtcdHealth  string `json:"etcdHealth,omitempty"`
	APIError    string `json:"apiError,omitempty"`
	// APIServer is the Kubernetes API server's state ("ready", or why it is
	// not); InService: its address is in the kubernetes endpoints.
	APIServer string `json:"apiServer,omitempty"`
	InService bool   `json:"inService,omitempty"`
	// KubeNode is its Kubernetes Node's readiness as `kubectl get nodes`
	// shows it: "Ready", "NotReady (reason)", or "not registered".
	KubeNode string `json:"kubeNode,omitempty"`
	// Version is the Talos version it reported last (runs with a rolling
	// upgrade).
	Version string `json:"version,omitempty"`
}

// Check is one expectation and whether it held.
type Check struct {
	Name     string `json:"name"`
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
	Passed   bool   `json:"passed"`
}

// Diagnosis names a failure with its evidence. Codes are a stable vocabulary (DESIGN.md).
type Diagnosis struct {
	Code     string `json:"code"`
	Node     string `json:"node,omitempty"`
	Message  string `json:"message"`
	Evidence string `json:"evidence"`
	TMs      int64  `json:"tMs"`
}

// Fault is one fault as it was scheduled and ran.
type Fault struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Node    string `json:"node,omitempty"`
	Trigger string `json:"trigger"`
	StartMs int64  `json:"startMs"`
	EndMs   int64  `json:"endMs"`
	Error   string `json:"error,omitempty"`
}

// Validate reports what makes a report read back inconsistent, each problem
// at its JSON path (reports.ReadJSON places them in the file): a schema,
// verdict or time scale that does not exist, a scenario copy whose sha256 is
// not its content's, a schedule with a fault named twice or of an unknown
// kind or on a node the run did not have, negative durations and counts,
// an inconsistent history (history.Check), fault events and triggers of
// faults the schedule does not hold; a run voided that is not an error
// with a stall in its history. known says which fault kinds and
// trigger states exist (its zero value checks none; harness/chaos knows them
// and imports this package: chaos.Known).
func (r *Result) Validate(known history.Known) []*strictjson.Error {
	var p strictjson.Problems

	if r.Schema != Schema && r.Schema != SchemaV1 {
		p.Addf("schema", "is %s: want %s or %s", strictjson.Quote(r.Schema), Schema, SchemaV1)
	}

	for _, f := range []struct{ name, value string }{{"scenario", r.Scenario}, {"target", r.Target}} {
		if f.value == "" {
			p.Addf(f.name, "is empty")
		}
	}

	if r.Verdict != Pass && r.Verdict != Fail && r.Verdict != Error {
		p.Addf("verdict", "is %s: want %s, %s or %s", strictjson.Quote(r.Verdict), Pass, Fail, Error)
	}

	if r.Voided && (r.Verdict != Error || r.Error == "" || len(r.History.VoidingStalls()) == 0) {
		p.Addf("voided", "is true, but a voided run has verdict %s, an error that says why and a stall of a Talos minute or more in its history", Error)
	}

	for _, s := range []struct {
		name  string
		value float64
	}{{"timeScale", r.TimeScale}, {"scenarioTimeScale", r.ScenarioTimeScale}} {
		if s.value != 0 && !(s.value >= 1 && s.value <= scenario.MaxTimeScale) {
			p.Addf(s.name, "is %v: a time scale is between 1 and %d", s.value, scenario.MaxTimeScale)
		}
	}

	nonNegative(&p, "durationMs", r.DurationMs)

	for i, c := range r.ClockFloors {
		nonNegative(&p, strictjson.Key(strictjson.Index("clockFloors", i), "talosMs"), c.TalosMs)
		nonNegative(&p, strictjson.Key(strictjson.Index("clockFloors", i), "modelledMs"), c.ModelledMs)
	}

	if r.Source != nil {
		if sum := sha256.Sum256([]byte(r.Source.Content)); r.Source.SHA256 != hex.EncodeToString(sum[:]) {
			p.Addf("source.sha256", "is %s, but the scenario copy's content has sha256 %x: the copy was changed or the sum is not its",
				strictjson.Quote(r.Source.SHA256), sum)
		}
	}

	r.checkSchedule(&p, known.Kind)
	r.checkOutcome(&p)

	if r.History != nil {
		r.History.Check(&p, "history", known)
		r.checkHistoryFaults(&p)
	}

	return p.Errs()
}

func nonNegative(p *strictjson.Problems, path string, v int64) {
	if v < 0 {
		p.Addf(path, "is %d: want 0 or more", v)
	}
}

func (r *Result) checkSchedule(p *strictjson.Problems, knownKind func(string) bool) {
	var nodes map[string]bool

	if r.History != nil {
		nodes = map[string]bool{}
		for _, n := range r.History.Nodes {
			nodes[n.Name] = true
		}
	}

	names := strictjson.Names{What: "fault", List: "schedule", Twice: "scheduled twice"}

	for i, f := range r.Schedule {
		fp := strictjson.Index("schedule", i)

		names.Check(p, strictjson.Key(fp, "name"), i, f.Name)

		checkKind(p, strictjson.Key(fp, "kind"), f.Kind, knownKind)

		for j, n := range f.Nodes {
			if n == "" || nodes != nil && !nodes[n] {
				p.Addf(strictjson.Index(strictjson.Key(fp, "nodes"), j), "names node %s, which the run did not have", strictjson.Quote(n))
			}
		}
	}
}

func checkKind(p *strictjson.Problems, path, kind string, knownKind func(string) bool) {
	switch {
	case kind == "":
		p.Addf(path, "is empty")
	case knownKind != nil && !knownKind(kind):
		p.Addf(path, "is %s: no such fault kind (talchaos faults)", strictjson.Quote(kind))
	}
}

// checkOutcome checks the counts and offsets of what the run recorded for
// people to read (the faults as they ran are shown, not replayed: their
// kinds are not checked).
func (r *Result) checkOutcome(p *strictjson.Problems) {
	if r.Outcome.Voters < 0 {
		p.Addf("outcome.voters", "is %d: a count is not negative", r.Outcome.Voters)
	}

	if r.Outcome.Learners < 0 {
		p.Addf("outcome.learners", "is %d: a count is not negative", r.Outcome.Learners)
	}

	for i, pr := range r.Outcome.Promotions {
		pp := strictjson.Index("outcome.promotions", i)
		nonNegative(p, strictjson.Key(pp, "learnerMs"), pr.LearnerMs)

		if pr.PromotedMs < -1 {
			p.Addf(strictjson.Key(pp, "promotedMs"), "is %d: an offset, or -1 for never", pr.PromotedMs)
		}

		switch {
		case pr.RemovedMs < 0:
			p.Addf(strictjson.Key(pp, "removedMs"), "is %d: an offset, or 0 for not removed", pr.RemovedMs)
		case pr.RemovedMs > 0 && pr.PromotedMs >= 0:
			p.Addf(strictjson.Key(pp, "removedMs"), "is %d: a promoted member's stint ends at its promotion (promotedMs %d)", pr.RemovedMs, pr.PromotedMs)
		}
	}

	for i, d := range r.Diagnoses {
		nonNegative(p, strictjson.Key(strictjson.Index("diagnoses", i), "tMs"), d.TMs)
	}

	for i, f := range r.Faults {
		fp := strictjson.Index("faults", i)

		for _, t := range []struct {
			name string
			ms   int64
		}{{"startMs", f.StartMs}, {"endMs", f.EndMs}} {
			if t.ms < -1 {
				p.Addf(strictjson.Key(fp, t.name), "is %d: an offset, or -1 for never", t.ms)
			}
		}
	}

	for i, e := range r.Events {
		nonNegative(p, strictjson.Key(strictjson.Index("events", i), "tMs"), e.TMs)
	}
}

// checkHistoryFaults checks that the history's fault events and triggers are
// of faults the schedule holds, with their kinds and nodes.
func (r *Result) checkHistoryFaults(p *strictjson.Problems) {
	kinds := make(map[string]string, len(r.Schedule))
	nodes := make(map[string][]string, len(r.Schedule))

	for _, f := range r.Schedule {
		kinds[f.Name], nodes[f.Name] = f.Kind, f.Nodes
	}

	for i, e := range r.History.Entries {
		if p.Full() {
			return
		}

		ep := strictjson.Index("history.entries", i)

		switch {
		case e.Fault != nil:
			kind, ok := kinds[e.Fault.Name]

			switch {
			case !ok:
				p.Addf(strictjson.Key(strictjson.Key(ep, "fault"), "name"), "fault %s is not in the schedule", strictjson.Quote(e.Fault.Name))
			case kind != e.Fault.Kind:
				p.Addf(strictjson.Key(strictjson.Key(ep, "fault"), "kind"), "is %s, but the schedule's fault %s is of kind %s",
					strictjson.Quote(e.Fault.Kind), strictjson.Quote(e.Fault.Name), strictjson.Quote(kind))
			case !slices.Equal(e.Fault.Nodes, nodes[e.Fault.Name]):
				p.Addf(strictjson.Key(strictjson.Key(ep, "fault"), "nodes"), "are [%s], but the schedule's fault %s is on [%s]",
					strings.Join(quoteAll(e.Fault.Nodes), ", "), strictjson.Quote(e.Fault.Name), strings.Join(quoteAll(nodes[e.Fault.Name]), ", "))
			}
		case e.Trigger != nil:
			if _, ok := kinds[e.Trigger.Fault]; !ok {
				p.Addf(strictjson.Key(strictjson.Key(ep, "trigger"), "fault"), "fault %s is not in the schedule", strictjson.Quote(e.Trigger.Fault))
			}
		}
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strictjson.Quote(s)
	}

	return out
}
