package scenario

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)

// validator collects every problem of a decoded, defaulted scenario, so one run of the
// harness reports them all rather than one per edit.
type validator struct {
	s    *Scenario
	errs []*Error
	// nodes is the set of node names, nil when the cluster size is itself invalid: then
	// every node-name check would fail for the same reason, so they are skipped.
	nodes []string
}

func (v *validator) errorf(field, format string, args ...any) {
	v.errs = append(v.errs, v.s.Errorf(field, format, args...))
}

func (s *Scenario) validate() []*Error {
	v := &validator{s: s}

	v.header()
	v.cluster()
	v.orchestrator()
	v.faults()
	v.expect()
	v.configPatches()

	return v.errs
}

func (v *validator) header() {
	s := v.s

	if s.APIVersion != APIVersion {
		v.errorf("apiVersion", "must be %q, got %q", APIVersion, s.APIVersion)
	}

	if s.Kind != Kind {
		v.errorf("kind", "must be %q, got %q", Kind, s.Kind)
	}

	switch {
	case s.Name == "":
		v.errorf("name", "required")
	case !nameRE.MatchString(s.Name):
		v.errorf("name", "invalid name %q: lower-case letters, digits, dots and dashes, starting with a letter or digit", s.Name)
	}

	v.oneOf("talos", s.Talos, "talos profile", Profiles)

	// Written so that NaN fails too.
	if !(s.TimeScale >= 1 && s.TimeScale <= MaxTimeScale) {
		v.errorf("timeScale", "must be between 1 and %d, got %v", MaxTimeScale, s.TimeScale)
	}
}

func (v *validator) cluster() {
	c := v.s.Cluster

	if _, ok := v.s.lines["cluster"]; !ok {
		v.errorf("cluster", "required")

		return
	}

	ok := true

	if c.ControlPlanes < 1 || c.ControlPlanes > MaxNodes {
		v.errorf("cluster.controlPlanes", "must be between 1 and %d, got %d", MaxNodes, c.ControlPlanes)

		ok = false
	}

	if c.Workers < 0 || c.Workers > MaxNodes {
		v.errorf("cluster.workers", "must be between 0 and %d, got %d", MaxNodes, c.Workers)

		ok = false
	}

	if ok {
		v.nodes = c.NodeNames()
	}

	for _, name := range sortedKeys(c.Nodes) {
		v.node("cluster.nodes."+name, name)
	}

	v.nonNegative("cluster.etcd.maxLearners", c.Etcd.MaxLearners)
	v.nonNegative("cluster.workload.writesPerSecond", c.Workload.WritesPerSecond)
	v.nonNegative("cluster.workload.valueBytes", c.Workload.ValueBytes)
}

func (v *validator) orchestrator() {
	o := v.s.Orchestrator

	v.oneOf("orchestrator.name", o.Name, "orchestrator", Orchestrators)

	switch {
	case o.Name == "exec" && (len(o.Command) == 0 || o.Command[0] == ""):
		v.errorf("orchestrator.command", "required by the exec orchestrator")
	case o.Name != "exec" && len(o.Command) > 0:
		v.errorf("orchestrator.command", "only used by the exec orchestrator, not %q", o.Name)
	}

	if o.RetryApply && o.Name != "naive" {
		v.errorf("orchestrator.retryApply", "only used by the naive orchestrator, not %q", o.Name)
	}

	if len(o.BootstrapNodes) > 0 && o.Name != "naive" {
		v.errorf("orchestrator.bootstrapNodes", "only used by the naive orchestrator, not %q", o.Name)
	}

	for i, n := range o.BootstrapNodes {
		if v.nodes != nil && !(IsControlPlane(n) && slices.Contains(v.nodes, n)) {
			v.errorf(fmt.Sprintf("orchestrator.bootstrapNodes[%d]", i), "%q is not a control-plane node: one of %s", n, strings.Join(v.controlPlanes(), ", "))
		}
	}

	v.oneOf("orchestrator.talosconfig", o.Talosconfig, "talosconfig source", []string{"", "other-secrets"})

	if v.nodes != nil && !(IsControlPlane(o.BootstrapNode) && slices.Contains(v.nodes, o.BootstrapNode)) {
		v.errorf("orchestrator.bootstrapNode", "%q is not a control-plane node: one of %s",
			o.BootstrapNode, strings.Join(v.controlPlanes(), ", "))
	}
}

func (v *validator) faults() {
	first := map[string]int{}

	for i, f := range v.s.Faults {
		p := fmt.Sprintf("faults[%d]", i)

		if j, dup := first[f.Name]; dup {
			v.errorf(p+".name", "duplicate fault name %q (also faults[%d])", f.Name, j)
		} else {
			first[f.Name] = i
		}

		if f.Kind == "" {
			v.errorf(p+".kind", "required")
		}

		if f.Node != "" && f.Node != RandomNode {
			v.node(p+".node", f.Node)
		}

		for j, n := range f.Nodes {
			v.node(fmt.Sprintf("%s.nodes[%d]", p, j), n)
		}

		if f.Port != "" {
			v.oneOf(p+".port", f.Port, "port", Ports)
		}

		if f.Direction != "" {
			v.oneOf(p+".direction", f.Direction, "direction", Directions)
		}

		v.trigger(p, f)

		if f.RateKBps < 0 {
			v.errorf(p+".rateKBps", "must not be negative, got %d", f.RateKBps)
		}

		v.nonNegative(p+".count", f.Count)

		// Durations from YAML are never negative; these guard scenarios built in code.
		for _, d := range []struct {
			field string
			d     Duration
		}{{"for", f.For}, {"latency", f.Latency}, {"jitter", f.Jitter}} {
			if d.d.Duration < 0 {
				v.errorf(p+"."+d.field, "must not be negative, got %s", d.d)
			}
		}
	}
}

func (v *validator) trigger(p string, f Fault) {
	switch {
	case f.At == nil && f.When == nil:
		v.errorf(p, "needs a trigger: at or when")
	case f.At != nil && f.When != nil:
		v.errorf(p+".when", "cannot be combined with at: a fault has exactly one trigger")
	case f.When != nil:
		v.when(p+".when", f.When)
	}

	if f.Until != nil {
		if f.For.Duration > 0 {
			v.errorf(p+".until", "cannot be combined with for: a fault heals once")
		}

		v.when(p+".until", f.Until)
	}
}

func (v *validator) when(p string, w *When) {
	if w.Node == "" {
		v.errorf(p+".node", "required")
	} else {
		v.node(p+".node", w.Node)
	}

	if w.State == "" {
		v.errorf(p+".state", "required: one of %s", strings.Join(TriggerStates, ", "))
	} else {
		v.oneOf(p+".state", w.State, "trigger state", TriggerStates)
	}

	switch {
	case w.Count < 0:
		v.errorf(p+".count", "must not be negative, got %d", w.Count)
	case w.Count > 0 && w.State != StatePromoteRefused:
		v.errorf(p+".count", "only counts with state %s, not %s", StatePromoteRefused, w.State)
	}
}

func (v *validator) expect() {
	e := v.s.Expect

	if e.Within.Duration <= 0 {
		v.errorf("expect.within", "must be positive")
	}

	v.memberCount("expect.voters", e.Voters)
	v.memberCount("expect.learners", e.Learners)

	for i, n := range e.NodesInMaintenance {
		v.node(fmt.Sprintf("expect.nodesInMaintenance[%d]", i), n)
	}

	for i, d := range e.Diagnoses {
		p := fmt.Sprintf("expect.diagnoses[%d]", i)

		if d.Code == "" {
			v.errorf(p+".code", "required: one of %s", strings.Join(DiagnosisCodes, ", "))
		} else {
			v.oneOf(p+".code", d.Code, "diagnosis code", DiagnosisCodes)
		}

		if d.Node != "" {
			v.node(p+".node", d.Node)
		}
	}

	for i, code := range e.NoDiagnoses {
		p := fmt.Sprintf("expect.noDiagnoses[%d]", i)
		if v.oneOf(p, code, "diagnosis code", DiagnosisCodes) &&
			slices.ContainsFunc(e.Diagnoses, func(d ExpectedDiagnosis) bool { return d.Code == code }) {
			v.errorf(p, "%q is also expected in expect.diagnoses", code)
		}
	}

	for i, p := range e.Promotions {
		field := fmt.Sprintf("expect.promotions[%d]", i)

		if p.Node == "" {
			v.errorf(field+".node", "required")
		} else {
			v.node(field+".node", p.Node)
		}

		if p.AtMost.Duration > 0 && p.AtLeast.Duration > p.AtMost.Duration {
			v.errorf(field+".atLeast", "%s is more than atMost %s", p.AtLeast, p.AtMost)
		}
	}
}

// configPatches checks that each patch names existing nodes and is not empty;
// the target parses it with the machinery when it generates the configs.
func (v *validator) configPatches() {
	for i, p := range v.s.Cluster.ConfigPatches {
		field := fmt.Sprintf("cluster.configPatches[%d]", i)

		if strings.TrimSpace(p.Patch) == "" {
			v.errorf(field+".patch", "required")
		}

		for j, n := range p.Nodes {
			v.node(fmt.Sprintf("%s.nodes[%d]", field, j), n)
		}
	}
}

// memberCount checks an expected etcd member count: at most one member per control plane.
func (v *validator) memberCount(field string, n *int) {
	switch {
	case n == nil:
	case *n < 0:
		v.errorf(field, "must not be negative, got %d", *n)
	case v.nodes != nil && *n > v.s.Cluster.ControlPlanes:
		v.errorf(field, "%d is more than the %d control planes", *n, v.s.Cluster.ControlPlanes)
	}
}

// node checks that name is a node of the cluster.
func (v *validator) node(field, name string) {
	if v.nodes != nil && !slices.Contains(v.nodes, name) {
		v.errorf(field, "unknown node %q: one of %s", name, strings.Join(v.nodes, ", "))
	}
}

// oneOf checks that value is among allowed, naming what it is in the message.
func (v *validator) oneOf(field, value, what string, allowed []string) bool {
	if slices.Contains(allowed, value) {
		return true
	}

	v.errorf(field, "unknown %s %q: one of %s", what, value, strings.Join(allowed, ", "))

	return false
}

func (v *validator) nonNegative(field string, n int) {
	if n < 0 {
		v.errorf(field, "must not be negative, got %d", n)
	}
}

func (v *validator) controlPlanes() []string {
	var out []string

	for _, n := range v.nodes {
		if IsControlPlane(n) {
			out = append(out, n)
		}
	}

	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}

	slices.Sort(keys)

	return keys
}
