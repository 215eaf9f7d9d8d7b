package result

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/target"
)

func validResult() *Result {
	content := "apiVersion: talchaos/v1\nkind: Scenario\nname: x\ncluster: {controlPlanes: 2}\n"
	sum := sha256.Sum256([]byte(content))

	return &Result{
		Schema: Schema, Scenario: "x", Target: "sim", Seed: 1, Verdict: Pass, TimeScale: 60, ScenarioTimeScale: 60,
		Source:   &Source{Path: "x.yaml", SHA256: hex.EncodeToString(sum[:]), Content: content},
		Schedule: []Planned{{Name: "f", Kind: "latency", Nodes: []string{"cp2"}}},
		Faults:   []Fault{{Name: "f", Kind: "latency", StartMs: -1, EndMs: -1}},
		Outcome:  Outcome{Voters: 2, Promotions: []Promotion{{Node: "cp2", LearnerMs: 5, PromotedMs: -1}}},
		History: &history.History{
			Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Scale: 60,
			Nodes: []history.Node{{Name: "cp1", Role: target.ControlPlane, Address: "a"}, {Name: "cp2", Role: target.ControlPlane, Address: "b"}},
			Entries: []history.Entry{
				{WallMs: 1, TalosMs: 60, Node: "cp2", Fault: &history.FaultEvent{Name: "f", Kind: "latency", Phase: history.FaultStarted, Nodes: []string{"cp2"}}},
				{WallMs: 2, TalosMs: 120, Node: "cp2", Trigger: &history.Trigger{Fault: "f", State: "learner"}},
			},
		},
	}
}

func TestValidate(t *testing.T) {
	known := history.Known{Kind: func(k string) bool { return k == "latency" || k == "partition" }, States: []string{"learner", "voter"}}

	tests := []struct {
		name   string
		change func(r *Result)
		want   []string
	}{
		{"valid", func(*Result) {}, nil},
		{"v1 without the v2 fields", func(r *Result) {
			r.Schema, r.Source, r.Schedule, r.History, r.ScenarioTimeScale = SchemaV1, nil, nil, nil, 0
		}, nil},
		{"schema", func(r *Result) { r.Schema = "talchaos.report/v3" }, []string{`schema: is "talchaos.report/v3"`}},
		{"scenario", func(r *Result) { r.Scenario = "" }, []string{"scenario: is empty"}},
		{"target", func(r *Result) { r.Target = "" }, []string{"target: is empty"}},
		{"verdict", func(r *Result) { r.Verdict = "" }, []string{`verdict: is "": want pass, fail or error`}},
		{"voided pass", func(r *Result) { r.Voided = true }, []string{"voided: is true, but a voided run has verdict error, an error that says why and a stall of a Talos minute or more in its history"}},
		{"voided without a stall", func(r *Result) { r.Verdict, r.Error, r.Voided = Error, "the host stalled", true }, []string{"voided: is true"}},
		// At 60x a Talos minute is a second of wall time.
		{"voided by a stall too short", func(r *Result) {
			r.Verdict, r.Error, r.Voided = Error, "the host stalled", true
			last := r.History.Entries[len(r.History.Entries)-1]
			r.History.Entries = append(r.History.Entries, history.Entry{WallMs: last.WallMs + 999, TalosMs: last.TalosMs + 59940, Stall: &history.Stall{DurationMs: 999}})
		}, []string{"voided: is true"}},
		{"voided", func(r *Result) {
			r.Verdict, r.Error, r.Voided = Error, "the host stalled", true
			last := r.History.Entries[len(r.History.Entries)-1]
			r.History.Entries = append(r.History.Entries, history.Entry{WallMs: last.WallMs + 1000, TalosMs: last.TalosMs + 60000, Stall: &history.Stall{DurationMs: 1000}})
		}, nil},
		{"time scale", func(r *Result) { r.TimeScale = 1e6 }, []string{"timeScale: is 1e+06: a time scale is between 1 and 10000"}},
		{"scenario time scale", func(r *Result) { r.ScenarioTimeScale = 0.1 }, []string{"scenarioTimeScale: is 0.1"}},
		{"duration", func(r *Result) { r.DurationMs = -3 }, []string{"durationMs: is -3: want 0 or more"}},
		{"clock floor", func(r *Result) { r.ClockFloors = []ClockFloor{{TalosMs: -1}} }, []string{"clockFloors[0].talosMs: is -1"}},
		{"sha256", func(r *Result) { r.Source.Content += "#\n" }, []string{"source.sha256: is \"", "but the scenario copy's content has sha256"}},
		{"sha256 not hex", func(r *Result) { r.Source.SHA256 = "\x1b[2J" }, []string{`source.sha256: is "\x1b[2J"`}},
		{"schedule twice", func(r *Result) { r.Schedule = append(r.Schedule, r.Schedule[0]) }, []string{`schedule[1].name: fault "f" is scheduled twice (also schedule[0])`}},
		{"schedule kind", func(r *Result) { r.Schedule[0].Kind = "lag" }, []string{`schedule[0].kind: is "lag": no such fault kind`, `history.entries[0].fault.kind: is "latency", but the schedule's fault "f" is of kind "lag"`}},
		{"schedule no kind", func(r *Result) { r.Schedule[0].Kind = "" }, []string{"schedule[0].kind: is empty"}},
		{"schedule node", func(r *Result) { r.Schedule[0].Nodes = []string{"cp3"} }, []string{`schedule[0].nodes[0]: names node "cp3", which the run did not have`}},
		{"schedule unnamed", func(r *Result) { r.Schedule[0].Name = "" }, []string{"schedule[0].name: is empty"}},
		{"voters", func(r *Result) { r.Outcome.Voters = -1 }, []string{"outcome.voters: is -1"}},
		{"promotion", func(r *Result) { r.Outcome.Promotions[0].PromotedMs = -2 }, []string{"outcome.promotions[0].promotedMs: is -2: an offset, or -1 for never"}},
		{"removal", func(r *Result) { r.Outcome.Promotions[0].RemovedMs = -1 }, []string{"outcome.promotions[0].removedMs: is -1: an offset, or 0 for not removed"}},
		{"removal after a promotion", func(r *Result) { r.Outcome.Promotions[0].PromotedMs, r.Outcome.Promotions[0].RemovedMs = 7, 9 }, []string{"outcome.promotions[0].removedMs: is 9: a promoted member's stint ends at its promotion (promotedMs 7)"}},
		{"fault offsets", func(r *Result) { r.Faults[0].EndMs = -9 }, []string{"faults[0].endMs: is -9"}},
		{"diagnosis time", func(r *Result) { r.Diagnoses = []Diagnosis{{TMs: -1}} }, []string{"diagnoses[0].tMs: is -1"}},
		{"history", func(r *Result) { r.History.Scale = 0 }, []string{"history.scale: is 0"}},
		{"fault event not scheduled", func(r *Result) { r.History.Entries[0].Fault.Name = "g" }, []string{`history.entries[0].fault.name: fault "g" is not in the schedule`}},
		{"fault event elsewhere", func(r *Result) {
			r.History.Entries[0].Fault.Nodes, r.History.Entries[0].Node = []string{"cp1"}, "cp1"
		}, []string{`history.entries[0].fault.nodes: are ["cp1"], but the schedule's fault "f" is on ["cp2"]`}},
		{"trigger not scheduled", func(r *Result) { r.History.Entries[1].Trigger.Fault = "g" }, []string{`history.entries[1].trigger.fault: fault "g" is not in the schedule`}},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := validResult()
			tt.change(r)

			var got []string
			for _, e := range r.Validate(known) {
				got = append(got, e.Path+": "+e.Msg)
			}

			all := strings.Join(got, "\n")

			if len(tt.want) == 0 && len(got) > 0 {
				t.Fatalf("problems in a valid report:\n%s", all)
			}

			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems:\n%s\nlack %q", all, w)
				}
			}
		})
	}

	// Without a catalogue, kinds are not checked.
	r := validResult()
	r.Schedule[0].Kind, r.History.Entries[0].Fault.Kind = "anything", "anything"

	if errs := r.Validate(history.Known{}); len(errs) > 0 {
		t.Errorf("a kind was checked without a catalogue: %s", errs[0].Msg)
	}
}
