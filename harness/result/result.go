// Package result holds the outcome of one run: what the report writers serialise.
// Its JSON form is the report.json contract (schema talchaos.report/v2,
// DESIGN.md); reports of schema v1 are still read.
package result

import (
	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/eventlog"
	"github.com/talchaos/talchaos/harness/history"
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
	Schedule  []Planned        `json:"schedule"`
	Verdict   string           `json:"verdict"`
	Error     string           `json:"error,omitempty"`
	Outcome   Outcome          `json:"outcome"`
	Checks    []Check          `json:"checks"`
	Diagnoses []Diagnosis      `json:"diagnoses"`
	Faults    []Fault          `json:"faults"`
	Events    []eventlog.Event `json:"events"`
	// History is the typed record of the run the verdict is derived from
	// (harness/judge); absent in v1 reports.
	History    *history.History `json:"history,omitempty"`
	StartedAt  string           `json:"startedAt"`
	DurationMs int64            `json:"durationMs"`
	Replay     string           `json:"replay"`
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
}

// Promotion is one node's time as a learner. PromotedMs is -1 when it never was.
type Promotion struct {
	Node       string `json:"node"`
	LearnerMs  int64  `json:"learnerMs"`
	PromotedMs int64  `json:"promotedMs"`
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
