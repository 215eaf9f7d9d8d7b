package judge

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/talchaos/talchaos/harness/clock"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
)

// Verdict is the judgement of a run: what its history shows, and whether the
// scenario's expectations held. It is a pure function of the history.
type Verdict struct {
	Outcome   result.Outcome
	Diagnoses []result.Diagnosis
	Checks    []result.Check
	// Verdict is result.Pass or result.Fail, or result.Error when the
	// run could not be carried out as the scenario says: a fault could not
	// be injected or healed (Error says which), or the expectations failed
	// across a long stall of talchaos's own process (Void says which).
	Verdict string
	Error   string
	Void    string
}

// Apply sets res's outcome, diagnoses, checks and verdict to v's; a verdict
// error says why in res.Error, and a voided one sets res.Voided.
func (v Verdict) Apply(res *result.Result) {
	res.Outcome, res.Diagnoses, res.Checks, res.Verdict = v.Outcome, v.Diagnoses, v.Checks, v.Verdict
	res.Error, res.Voided = v.Error, false

	if v.Void != "" {
		res.Error, res.Voided = v.Void, true
	}
}

// Judge judges a run's history against the scenario's expectations.
func Judge(h history.History, exp scenario.Expect) Verdict {
	ev := FromHistory(h, Options{})

	v := Verdict{Outcome: outcome(ev), Diagnoses: Diagnose(ev)}

	// Converged is a state that held, not one poll's luck.
	v.Outcome.Converged = false

	if since, ok := ConvergedSince(h); ok {
		held := ev.Final.At - since
		v.Outcome.ConvergedFor = ev.Clock.TalosString(held)
		v.Outcome.Converged = held >= ev.Clock.Wall(exp.Stable.Duration)
	}

	v.Checks = Checks(exp, v.Outcome, v.Diagnoses, ev.Clock)
	v.Verdict = result.Pass

	for _, c := range v.Checks {
		if !c.Passed {
			v.Verdict = result.Fail
		}
	}

	if why := faultFailures(h); why != "" {
		v.Verdict, v.Error = result.Error, why
	} else if v.Verdict == result.Fail {
		if why := stallVoids(h); why != "" {
			v.Verdict, v.Void = result.Error, why
		}
	}

	return v
}

// outcome is the final state of the cluster, with every member seen as a
// learner and when it was promoted, and how many nodes were upgraded.
func outcome(ev *Evidence) result.Outcome {
	out := OutcomeOf(ev.Final)

	if len(ev.FirstVersion) > 0 {
		out.Upgraded = new(len(ev.Upgraded()))
	}

	// A row a member: a node removed and joined again waited twice.
	for _, st := range ev.stints {
		p := result.Promotion{Node: st.node, Member: history.Member{ID: st.id}.IDString(), LearnerMs: st.learner.Milliseconds(), PromotedMs: -1}

		switch {
		case st.ended && st.removed:
			p.RemovedMs = max(st.end.Milliseconds(), 1)
		case st.ended:
			p.PromotedMs = st.end.Milliseconds()
			p.WaitTalos = ev.Clock.TalosString(st.end - st.learner)
		}

		out.Promotions = append(out.Promotions, p)
	}

	sort.SliceStable(out.Promotions, func(i, j int) bool {
		a, b := out.Promotions[i], out.Promotions[j]

		return a.LearnerMs < b.LearnerMs || (a.LearnerMs == b.LearnerMs && a.Node < b.Node)
	})

	return out
}

// Checks compares the outcome and diagnoses with the expectations; clk turns
// observed wall-clock waits into Talos time.
func Checks(exp scenario.Expect, out result.Outcome, diags []result.Diagnosis, clk clock.Clock) []result.Check {
	checks := []result.Check{}

	add := func(name, expected, actual string) {
		checks = append(checks, result.Check{Name: name, Expected: expected, Actual: actual, Passed: expected == actual})
	}

	if exp.Converged != nil {
		actual := fmt.Sprint(out.Converged)
		if !out.Converged && out.ConvergedFor != "" {
			actual += fmt.Sprintf(" (converged for the last %s only, %s required)", out.ConvergedFor, exp.Stable)
		}

		checks = append(checks, result.Check{Name: "converged", Expected: fmt.Sprint(*exp.Converged), Actual: actual, Passed: *exp.Converged == out.Converged})
	}

	if exp.Voters != nil {
		add("voters", fmt.Sprint(*exp.Voters), fmt.Sprint(out.Voters))
	}

	if exp.Learners != nil {
		add("learners", fmt.Sprint(*exp.Learners), fmt.Sprint(out.Learners))
	}

	if exp.KubernetesEndpoints != nil {
		actual := "no Kubernetes"
		if out.KubernetesEndpoints != nil {
			actual = fmt.Sprint(*out.KubernetesEndpoints)
		}

		add("kubernetesEndpoints", fmt.Sprint(*exp.KubernetesEndpoints), actual)
	}

	if exp.NodesReady != nil {
		actual := "no Kubernetes"
		if out.NodesReady != nil {
			actual = fmt.Sprint(*out.NodesReady)
		}

		add("nodesReady", fmt.Sprint(*exp.NodesReady), actual)
	}

	if exp.SharedIP != "" {
		actual := "no answering control plane's config gives a shared IP"
		passed := false

		if ip := out.SharedIP; ip != nil {
			passed = ip.Is(exp.SharedIP)
			actual = ip.State() + " (" + ip.Address + ")"

			switch {
			case ip.Holder != "" && ip.Error != "":
				actual = fmt.Sprintf("held by %s (%s), but its Talos API does not answer there: %s", ip.Holder, ip.Address, ip.Error)
			case ip.Holder != "":
				actual = fmt.Sprintf("held by %s (%s)", ip.Holder, ip.Address)
			}
		}

		checks = append(checks, result.Check{Name: "sharedIP", Expected: exp.SharedIP, Actual: actual, Passed: passed})
	}

	if exp.Upgraded != nil {
		actual := "no versions looked at"
		if out.Upgraded != nil {
			actual = fmt.Sprint(*out.Upgraded)
		}

		add("upgraded", fmt.Sprint(*exp.Upgraded), actual)
	}

	if exp.NodesInMaintenance != nil {
		want := slices.Sorted(slices.Values(exp.NodesInMaintenance))
		got := slices.Sorted(slices.Values(out.NodesInMaintenance))
		add("nodesInMaintenance", "["+strings.Join(want, " ")+"]", "["+strings.Join(got, " ")+"]")
	}

	for _, d := range exp.Diagnoses {
		name := "diagnosis " + d.Code
		if d.Node != "" {
			name += " on " + d.Node
		}

		found := slices.ContainsFunc(diags, func(g result.Diagnosis) bool {
			return g.Code == d.Code && (d.Node == "" || g.Node == d.Node)
		})

		add(name, "present", presence(found))
	}

	for _, want := range exp.Promotions {
		lo, hi := want.AtLeast.Duration, want.AtMost.Duration
		name := "promotion wait " + want.Node
		actual := "never promoted"
		passed := false

		for _, p := range out.Promotions {
			if p.Node != want.Node || p.PromotedMs < 0 {
				continue
			}

			wait := clk.Talos(msDuration(p.PromotedMs - p.LearnerMs))
			actual = wait.Round(time.Second).String()
			passed = wait >= lo && (hi == 0 || wait <= hi)
		}

		checks = append(checks, result.Check{Name: name, Expected: promotionBounds(lo, hi), Actual: actual, Passed: passed})
	}

	for _, code := range exp.NoDiagnoses {
		found := slices.ContainsFunc(diags, func(g result.Diagnosis) bool { return g.Code == code })
		add("no diagnosis "+code, "absent", map[bool]string{true: "present", false: "absent"}[found])
	}

	return checks
}

func promotionBounds(lo, hi time.Duration) string {
	switch {
	case hi == 0 && lo == 0:
		return "promoted"
	case hi == 0:
		return ">= " + lo.String()
	case lo == 0:
		return "<= " + hi.String()
	}

	return lo.String() + " .. " + hi.String()
}

func presence(found bool) string {
	if found {
		return "present"
	}

	return "absent"
}

// upgradedSet is Upgraded as a set.
func (ev *Evidence) upgradedSet() map[string]bool {
	out := map[string]bool{}
	for _, n := range ev.Upgraded() {
		out[n] = true
	}

	return out
}

// Upgraded are the nodes that report another Talos version at the end than
// when first seen.
func (ev *Evidence) Upgraded() []string {
	var out []string

	for _, n := range ev.Final.Ordered() {
		if first, ok := ev.FirstVersion[n.Name]; ok && n.Version != "" && n.Version != first {
			out = append(out, n.Name)
		}
	}

	return out
}
