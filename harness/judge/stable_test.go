package judge

import (
	"fmt"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/scenario"
)

// timeline records observations as a run would: each a full look at the
// nodes at an offset (seconds), the last one marked final.
func timeline(t *testing.T, looks ...struct {
	at int
	o  *history.Observation
},
) history.History {
	t.Helper()

	var nodes []history.Node
	for _, n := range looks[0].o.Ordered() {
		nodes = append(nodes, history.Node{Name: n.Name, Role: n.Role, Address: n.Address})
	}

	rec := history.NewRecorder(time.Time{}, 1, nodes)

	for i, l := range looks {
		for _, n := range l.o.Ordered() {
			rec.Observe(time.Duration(l.at)*time.Second, n, i == len(looks)-1)
		}
	}

	return rec.History()
}

type look = struct {
	at int
	o  *history.Observation
}

func TestStableVerdicts(t *testing.T) {
	yes := true
	exp := scenario.Expect{Converged: &yes, Stable: scenario.Duration{Duration: 30 * time.Second}}

	learner := obs(func(o *history.Observation) {
		converged(o)
		ms := []history.Member{member(1, "cp1", cp1, false), member(2, "cp2", cp2, false), member(3, "cp3", cp3, true)}

		for _, n := range o.Nodes {
			n.Members = ms
		}

		o.Nodes["cp3"].Etcd = running(false, errLearnerRPC)
	})
	down := obs(func(o *history.Observation) {
		converged(o)
		o.Nodes["cp2"].Mode, o.Nodes["cp2"].Etcd, o.Nodes["cp2"].Members = history.ModeDown, nil, nil
	})

	for _, tc := range []struct {
		name      string
		looks     []look
		converged bool
		held      string
		settledAt int // the first second Settled holds (-1: never within 120 s)
	}{
		{"converged and held", []look{{0, learner}, {10, obs(converged)}, {45, obs(converged)}}, true, "35s", 40},
		{"converged a moment before the end", []look{{0, learner}, {40, obs(converged)}, {45, obs(converged)}}, false, "5s", 70},
		{"a break restarts the clock", []look{{0, obs(converged)}, {20, down}, {25, obs(converged)}, {60, obs(converged)}}, true, "35s", 55},
		{"never converged", []look{{0, learner}, {50, learner}}, false, "", 30},
		{"lost at the end", []look{{0, obs(converged)}, {50, down}}, false, "", 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := timeline(t, tc.looks...)
			v := Judge(h, exp)

			if v.Outcome.Converged != tc.converged || v.Outcome.ConvergedFor != tc.held {
				t.Errorf("converged %t for %q, want %t for %q", v.Outcome.Converged, v.Outcome.ConvergedFor, tc.converged, tc.held)
			}

			if want := map[bool]string{true: "pass", false: "fail"}[tc.converged]; v.Verdict != want {
				t.Errorf("verdict %s, want %s: %+v", v.Verdict, want, v.Checks)
			}

			first := -1

			for s := 0; s <= 120; s++ {
				if Settled(h, time.Duration(s)*time.Second, exp.Stable.Duration) {
					first = s

					break
				}
			}

			if first != tc.settledAt {
				t.Errorf("settled from %ds, want %ds", first, tc.settledAt)
			}
		})
	}
}

// The settle ends only when the final look confirms what the judge will
// grant: a final look that itself saw the cluster converge has not seen it
// hold, however long that look took (CI once judged "converged for the last
// 0s only" after a slow final poll). SettledAtFinal agrees with Judge on
// every timeline.
func TestSettledAtFinalAgreesWithJudge(t *testing.T) {
	yes := true
	exp := scenario.Expect{Converged: &yes, Stable: scenario.Duration{Duration: 30 * time.Second}}

	learner := obs(func(o *history.Observation) {
		converged(o)
		o.Nodes["cp3"].Etcd = running(false, errLearnerRPC)
	})

	for _, tc := range []struct {
		name    string
		looks   []look
		settled bool
	}{
		{"the final look saw it converge", []look{{0, learner}, {50, obs(converged)}}, false},
		{"converged a moment before the final look", []look{{0, learner}, {40, obs(converged)}, {45, obs(converged)}}, false},
		{"held up to the final look", []look{{0, learner}, {10, obs(converged)}, {45, obs(converged)}}, true},
		{"a steady failure", []look{{0, learner}, {50, learner}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := timeline(t, tc.looks...)

			// Quiet from the final look's start until long after: the
			// present-moment test alone would call it settled.
			if !Settled(h, h.Final().At+time.Hour, exp.Stable.Duration) {
				t.Fatalf("not settled an hour later")
			}

			if got := SettledAtFinal(h, exp.Stable.Duration); got != tc.settled {
				t.Errorf("settled at the final look %t, want %t", got, tc.settled)
			}

			v := Judge(h, exp)
			if converged := Converged(h.Final()); converged && SettledAtFinal(h, exp.Stable.Duration) != v.Outcome.Converged {
				t.Errorf("settled %t but judged converged %t (for %s)", SettledAtFinal(h, exp.Stable.Duration), v.Outcome.Converged, v.Outcome.ConvergedFor)
			}
		})
	}
}

// learner-not-synced is the leader refusing a learner whose etcd has started
// (the member carries its name), for long; refusals while it is still
// starting do not count, nor do those after it was promoted.
func TestLearnerNotSynced(t *testing.T) {
	refusal := func(pct float64) string {
		return fmt.Sprintf(`{"level":"error","msg":"rejecting promote learner: learner is not ready","learner-ready-percent":%g,"ready-percent-threshold":0.9}`, pct)
	}

	learnerNamed := func(name string) *history.Observation {
		return obs(func(o *history.Observation) {
			converged(o)
			ms := []history.Member{member(1, "cp1", cp1, false), member(2, name, cp2, true), member(3, "cp3", cp3, false)}

			for _, n := range o.Nodes {
				n.Members = ms
			}

			o.Nodes["cp2"].Etcd = running(false, errLearnerRPC)
		})
	}

	for _, tc := range []struct {
		name     string
		startsAt int             // second the learner is first seen named
		refusals map[int]float64 // second → ready percent
		want     bool
	}{
		{"behind for a minute", 1, map[int]float64{10: 0.6, 30: 0.5, 50: 0.4, 70: 0.3}, true},
		{"a snapshot still on its way for a minute", 1, map[int]float64{10: 0, 30: 0, 50: 0, 70: 0}, true},
		{"still starting for a minute", 60, map[int]float64{10: 0, 30: 0, 50: 0, 70: 0.5}, false},
		{"refusals of the next learner", 1, map[int]float64{70: 0.5, 100: 0.5, 130: 0.5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []history.Node
			for _, n := range learnerNamed("cp2").Ordered() {
				nodes = append(nodes, history.Node{Name: n.Name, Role: n.Role, Address: n.Address})
			}

			rec := history.NewRecorder(time.Time{}, 1, nodes)

			for _, n := range learnerNamed("").Ordered() {
				rec.Observe(time.Second, n, false)
			}

			for _, n := range learnerNamed("cp2").Ordered() {
				rec.Observe(time.Duration(tc.startsAt)*time.Second, n, false)
			}

			for s, pct := range tc.refusals {
				rec.Log(time.Duration(s)*time.Second, "cp1", history.Log{Source: history.LogEtcd, Level: "error", Text: refusal(pct)})
			}

			rec.Log(75*time.Second, "cp2", history.Log{Source: history.LogMachined, Text: history.PromotedLine})

			for _, n := range obs(converged).Ordered() {
				rec.Observe(80*time.Second, n, false)
				rec.Observe(200*time.Second, n, true)
			}

			ev := FromHistory(rec.History(), Options{})
			got := len(learnerNotSynced(ev)) > 0

			if got != tc.want {
				t.Errorf("diagnosed %t, want %t: %+v", got, tc.want, learnerNotSynced(ev))
			}
		})
	}
}
