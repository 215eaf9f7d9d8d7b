package history

import (
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/strictjson"
	"github.com/talchaos/talchaos/harness/target"
)

// validHistory is a small history as a Recorder writes it.
func validHistory() History {
	obs := func(name, addr string) *NodeObservation {
		return &NodeObservation{Name: name, Address: addr, Role: target.ControlPlane, Mode: ModeMaintenance}
	}

	return History{
		Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Scale: 60,
		Nodes: []Node{{Name: "cp1", Role: target.ControlPlane, Address: "10.0.0.1"}, {Name: "cp2", Role: target.ControlPlane, Address: "10.0.0.2"}},
		Entries: []Entry{
			{WallMs: 0, TalosMs: 0, Step: "preflight"},
			{WallMs: 1, TalosMs: 60, Node: "cp1", Observed: obs("cp1", "10.0.0.1")},
			{WallMs: 1, TalosMs: 60, Node: "cp2", Fault: &FaultEvent{Name: "f", Kind: "latency", Phase: FaultStarted, Nodes: []string{"cp2"}}},
			{WallMs: 2, TalosMs: 120, Fault: &FaultEvent{Name: "p", Kind: "partition", Phase: FaultFailed, Nodes: []string{"cp1", "cp2"}, Error: "no"}},
			{WallMs: 3, TalosMs: 180, Node: "cp1", Call: &Call{RPC: "ApplyConfiguration", Client: ClientInsecure, Code: "Unavailable", Failure: FailureNoConnection, DurationMs: 4}},
			{WallMs: 3, TalosMs: 180, Node: "cp1", Call: &Call{RPC: "Bootstrap", Client: ClientTalosconfig, Code: "Code(42)"}},
			{WallMs: 4, TalosMs: 240, Node: "cp2", Trigger: &Trigger{Fault: "f", State: "learner", Heal: true, AfterMs: 10000}},
			{WallMs: 5, TalosMs: 300, Node: "cp2", Log: &Log{Source: LogEtcd, Level: "warn", Text: "x"}},
			{WallMs: 6, TalosMs: 360, Node: "cp2", Observed: obs("cp2", "10.0.0.2"), Final: true},
			{WallMs: 6, TalosMs: 360, Stall: &Stall{DurationMs: 5}},
		},
	}
}

func TestCheck(t *testing.T) {
	known := Known{Kind: func(k string) bool { return k == "latency" || k == "partition" }, States: []string{"learner", "voter"}}

	tests := []struct {
		name   string
		change func(h *History)
		want   []string // "path: message" substrings, in the order recorded
	}{
		{"valid", func(*History) {}, nil},
		{"no entries", func(h *History) { h.Entries = nil }, nil},
		{"zero start", func(h *History) { h.Start = time.Time{} }, []string{"history.start: is the zero time"}},
		{"scale 0", func(h *History) { h.Scale = 0 }, []string{"history.scale: is 0: a time scale is between 1 and 10000"}},
		{"scale above the maximum", func(h *History) { h.Scale = 10001 }, []string{"history.scale: is 10001"}},
		{"no nodes", func(h *History) { h.Nodes = nil }, []string{"history.nodes: is empty", `history.entries[1].node: names node "cp1"`}},
		{"node twice", func(h *History) { h.Nodes[1].Name = "cp1" }, []string{`history.nodes[1].name: node "cp1" is listed twice (also nodes[0])`}},
		{"unnamed node", func(h *History) { h.Nodes[0].Name = "" }, []string{"history.nodes[0].name: is empty"}},
		{"no address", func(h *History) { h.Nodes[0].Address = "" }, []string{"history.nodes[0].address: is empty"}},
		{"role", func(h *History) { h.Nodes[0].Role = "\x1b[2J" }, []string{`history.nodes[0].role: is "\x1b[2J": want controlplane or worker`}},
		{"out of order", func(h *History) { h.Entries[4].WallMs, h.Entries[4].TalosMs = 1, 60 }, []string{"history.entries[4].wallMs: is 1, before the previous entry's 2: entries are in time order"}},
		{"earlier", func(h *History) { h.Entries[5].WallMs, h.Entries[5].TalosMs = 2, 120 }, []string{"history.entries[5].wallMs: is 2, before the previous entry's 3: entries are in time order"}},
		{"negative", func(h *History) { h.Entries[0].WallMs = -1 }, []string{"history.entries[0].wallMs: is -1"}},
		{"talos time", func(h *History) { h.Entries[2].TalosMs = 61 }, []string{"history.entries[2].talosMs: is 61, but wallMs × scale is 60"}},
		{"two things", func(h *History) { h.Entries[0].Log = &Log{Source: LogEtcd} }, []string{"history.entries[0]: records log and step at once"}},
		{"nothing", func(h *History) { h.Entries[0].Step = "" }, []string{"history.entries[0]: records nothing"}},
		{"stall of a node", func(h *History) { h.Entries[9].Node = "cp1" }, []string{`history.entries[9].node: names node "cp1": a stall is of talchaos's process, not of a node`}},
		{"stall of no time", func(h *History) { h.Entries[9].Stall.DurationMs = 0 }, []string{"history.entries[9].stall.durationMs: is 0: a stall lasts some time"}},
		{"stall from before the run", func(h *History) { h.Entries[9].Stall.DurationMs = 7 }, []string{"history.entries[9].stall.durationMs: is 7: a stall lasts some time, and not since before the run began (it ended 6 ms in)"}},
		{"final call", func(h *History) { h.Entries[4].Final = true }, []string{"history.entries[4].final: is set on an entry that is not an observation"}},
		{"unknown node", func(h *History) { h.Entries[7].Node = "cp3" }, []string{`history.entries[7].node: names node "cp3"`}},
		{"observation of no node", func(h *History) { h.Entries[1].Node = "" }, []string{"history.entries[1].node: missing: every observed entry names its node"}},
		{"observed elsewhere", func(h *History) { h.Entries[1].Observed.Address = "10.9.9.9" }, []string{`history.entries[1].observed: shows node "cp1" at "10.9.9.9"`}},
		{"mode", func(h *History) { h.Entries[1].Observed.Mode = "" }, []string{`history.entries[1].observed.mode: is "": want one of unknown, down, maintenance`}},
		{"restarts", func(h *History) { h.Entries[1].Observed.Etcd = &Service{Restarts: -1} }, []string{"history.entries[1].observed.etcd.restarts: is -1"}},
		{"pod restarts", func(h *History) { h.Entries[1].Observed.APIServerPod = &StaticPod{Restarts: -2} }, []string{"history.entries[1].observed.apiServerPod.restarts: is -2"}},
		{"pod running and waiting", func(h *History) {
			h.Entries[1].Observed.APIServerPod = &StaticPod{Running: true, Waiting: "CrashLoopBackOff"}
		},
			[]string{`history.entries[1].observed.apiServerPod.waiting: is "CrashLoopBackOff", but the pod's container is running`}},
		{"pod ready, not running", func(h *History) { h.Entries[1].Observed.APIServerPod = &StaticPod{Ready: true} },
			[]string{"history.entries[1].observed.apiServerPod.ready: is true, but the pod's container is not running"}},
		{"shared IP", func(h *History) { h.Entries[1].Observed.SharedIP = "10.0.0.300" }, []string{`history.entries[1].observed.sharedIP: is "10.0.0.300": not an IP address`}},
		{"held nothing", func(h *History) { h.Entries[1].Observed.HoldsSharedIP = true }, []string{"history.entries[1].observed.holdsSharedIP: is true, but the node has no sharedIP to hold"}},
		{"client", func(h *History) { h.Entries[4].Call.Client = "" }, []string{`history.entries[4].call.client: is ""`}},
		{"rpc", func(h *History) { h.Entries[4].Call.RPC = "" }, []string{"history.entries[4].call.rpc: is empty"}},
		{"code", func(h *History) { h.Entries[4].Call.Code = "Code(x)" }, []string{`history.entries[4].call.code: is "Code(x)": not a gRPC code`}},
		{"failure", func(h *History) { h.Entries[4].Call.Failure = "bad-luck" }, []string{`history.entries[4].call.failure: is "bad-luck": want one of "" (none), refused-before-effect`}},
		{"duration", func(h *History) { h.Entries[4].Call.DurationMs = 1 << 60 }, []string{"history.entries[4].call.durationMs: is 1152921504606846976: want 0 to 172800000"}},
		{"kind", func(h *History) { h.Entries[2].Fault.Kind = "lag" }, []string{`history.entries[2].fault.kind: is "lag": no such fault kind`}},
		{"phase", func(h *History) { h.Entries[2].Fault.Phase = "" }, []string{`history.entries[2].fault.phase: is ""`}},
		{"error on start", func(h *History) { h.Entries[2].Fault.Error = "x" }, []string{`history.entries[2].fault.error: is set on phase "start"`}},
		{"fault node", func(h *History) { h.Entries[3].Fault.Nodes[1] = "cp3" }, []string{`history.entries[3].fault.nodes[1]: names node "cp3"`}},
		{"fault entry of another node", func(h *History) { h.Entries[2].Node = "cp1" }, []string{`history.entries[2].fault: is on nodes ["cp2"] but its entry is of node "cp1"`}},
		{"trigger state", func(h *History) { h.Entries[6].Trigger.State = "sleeping" }, []string{`history.entries[6].trigger.state: is "sleeping"`}},
		{"trigger count", func(h *History) { h.Entries[6].Trigger.Count = -2 }, []string{"history.entries[6].trigger.count: is -2"}},
		{"trigger fault", func(h *History) { h.Entries[6].Trigger.Fault = "" }, []string{"history.entries[6].trigger.fault: is empty"}},
		{"log source", func(h *History) { h.Entries[7].Log.Source = "kernel" }, []string{`history.entries[7].log.source: is "kernel": want machined or etcd`}},
		{"many problems are capped", func(h *History) {
			for i := range h.Entries {
				h.Entries[i].WallMs = -1
			}

			for range 100 {
				h.Entries = append(h.Entries, Entry{WallMs: -1})
			}
		}, []string{"history.entries[0].wallMs: is -1"}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := validHistory()
			tt.change(&h)

			var p strictjson.Problems

			h.Check(&p, "history", known)

			var got []string
			for _, e := range p.Errs() {
				got = append(got, e.Path+": "+e.Msg)
			}

			if len(got) > strictjson.MaxErrors {
				t.Errorf("%d problems kept, at most %d", len(got), strictjson.MaxErrors)
			}

			if len(tt.want) == 0 {
				if len(got) > 0 {
					t.Fatalf("problems in a valid history:\n%s", strings.Join(got, "\n"))
				}

				return
			}

			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems:\n%s\nlack %q", all, w)
				}
			}
		})
	}

	// Kinds are not checked without a catalogue.
	h := validHistory()
	h.Entries[2].Fault.Kind = "anything"

	var p strictjson.Problems
	if h.Check(&p, "history", Known{}); len(p.Errs()) > 0 {
		t.Errorf("a kind was checked without a catalogue: %v", p.Errs()[0].Msg)
	}
}
