package scenario

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)

// ValidName reports whether name is one a scenario may have: what a reader
// of another file naming scenarios (a shard's stamp) checks before it takes
// a name as a directory, as talchaos's own writers do.
func ValidName(name string) bool { return len(name) <= MaxNameLen && nameRE.MatchString(name) }

// validator collects every problem of a decoded, defaulted scenario, so one run of the
// harness reports them all rather than one per edit.
type validator struct {
	s    *Scenario
	cat  Catalogue
	errs []*Error
	// nodes is the set of node names, nil when the cluster size is itself invalid: then
	// every node-name check would fail for the same reason, so they are skipped.
	nodes []string
}

func (v *validator) errorf(field, format string, args ...any) {
	v.errs = append(v.errs, v.s.Errorf(field, format, args...))
}

func (s *Scenario) validate(cat Catalogue) []*Error {
	v := &validator{s: s, cat: cat}

	v.header()
	v.cluster()
	v.orchestrator()
	v.faults()
	v.expect()
	v.configPatches()
	v.certify()

	return v.errs
}

func (v *validator) certify() {
	c := v.s.Certify

	switch {
	case c.Expected != "" && c.Skip != "":
		v.errorf("certify", "expected and skip exclude each other")
	case c.Expected != "" && c.Expected != CertifySurvived && c.Expected != CertifyLoud:
		v.errorf("certify.expected", "must be %s or %s, got %q", CertifySurvived, CertifyLoud, c.Expected)
	}
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
	case len(s.Name) > MaxNameLen:
		v.errorf("name", "a name of %d characters: at most %d", len(s.Name), MaxNameLen)
	case !nameRE.MatchString(s.Name):
		v.errorf("name", "invalid name %q: lower-case letters, digits, dots and dashes, starting with a letter or digit", s.Name)
	}

	if len(s.Description) > MaxDescription {
		v.errorf("description", "%d bytes: at most %d", len(s.Description), MaxDescription)
	}

	v.listLen("reproduces", len(s.Reproduces))
	v.oneOf("talos", s.Talos, "talos profile", Profiles)

	// Written so that NaN fails too.
	if !(s.TimeScale >= 1 && s.TimeScale <= MaxTimeScale) {
		v.errorf("timeScale", "must be between 1 and %d, got %v", MaxTimeScale, s.TimeScale)
	}
}

func (v *validator) cluster() {
	c := v.s.Cluster

	if !v.s.lines.Has("cluster") {
		v.errorf("cluster", "required")

		return
	}

	ok := v.between("cluster.controlPlanes", int64(c.ControlPlanes), 1, MaxControlPlanes)
	ok = v.between("cluster.workers", int64(c.Workers), 0, MaxWorkers) && ok

	if ok {
		v.nodes = c.NodeNames()
	}

	for _, name := range sortedKeys(c.Nodes) {
		p := "cluster.nodes." + name
		v.node(p, name)

		o := c.Nodes[name]
		v.duration(p+".etcdImagePull", o.EtcdImagePull)
		v.duration(p+".bootDelay", o.BootDelay)
		v.duration(p+".etcdStartDelay", o.EtcdStartDelay)
		v.listLen(p+".addresses", len(o.Addresses))
	}

	v.network()

	v.between("cluster.etcd.maxLearners", int64(c.Etcd.MaxLearners), 0, MaxLearners)
	v.between("cluster.etcd.snapshotCount", int64(min(c.Etcd.SnapshotCount, MaxSnapshotEntries+1)), 0, MaxSnapshotEntries)
	v.between("cluster.etcd.snapshotCatchUpEntries", int64(min(c.Etcd.SnapshotCatchUpEntries, MaxSnapshotEntries+1)), 0, MaxSnapshotEntries)
	v.between("cluster.workload.writesPerSecond", int64(c.Workload.WritesPerSecond), 0, MaxWritesPerSecond)
	v.between("cluster.workload.valueBytes", int64(c.Workload.ValueBytes), 0, MaxValueBytes)
	v.listLen("cluster.configPatches", len(c.ConfigPatches))
}

func (v *validator) orchestrator() {
	o := v.s.Orchestrator

	v.oneOf("orchestrator.name", o.Name, "orchestrator", Orchestrators)
	v.duration("orchestrator.timeout", o.Timeout)
	v.listLen("orchestrator.command", len(o.Command))
	v.listLen("orchestrator.bootstrapNodes", len(o.BootstrapNodes))

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

	switch {
	case o.Endpoint == "":
	case o.Endpoint != EndpointCluster:
		v.errorf("orchestrator.endpoint", "unknown Talos API endpoint %q: %q (the cluster's endpoint), or leave it out for each node's own address", o.Endpoint, EndpointCluster)
	case o.Name != "naive":
		v.errorf("orchestrator.endpoint", "only used by the naive orchestrator, not %q", o.Name)
	case v.s.Cluster.Network == nil || v.s.Cluster.Network.Endpoint == "":
		v.errorf("orchestrator.endpoint", "%q needs cluster.network.endpoint: the address the calls go to", o.Endpoint)
	}

	for i, n := range o.BootstrapNodes {
		if v.nodes != nil && !(IsControlPlane(n) && slices.Contains(v.nodes, n)) {
			v.errorf(fmt.Sprintf("orchestrator.bootstrapNodes[%d]", i), "%q is not a control-plane node: one of %s", n, strings.Join(v.controlPlanes(), ", "))
		}
	}

	v.oneOf("orchestrator.talosconfig", o.Talosconfig, "talosconfig source", []string{"", "other-secrets"})

	if o.UpgradeTo != "" {
		if _, err := UpgradeVersion(o.UpgradeTo); err != nil {
			v.errorf("orchestrator.upgradeTo", "%q is not an installer image to upgrade to: %v", o.UpgradeTo, err)
		}
	}

	if v.nodes != nil && !(IsControlPlane(o.BootstrapNode) && slices.Contains(v.nodes, o.BootstrapNode)) {
		v.errorf("orchestrator.bootstrapNode", "%q is not a control-plane node: one of %s",
			o.BootstrapNode, strings.Join(v.controlPlanes(), ", "))
	}
}

func (v *validator) faults() {
	if !v.listLen("faults", len(v.s.Faults)) {
		return
	}

	first := map[string]int{}

	for i := range v.s.Faults {
		f := &v.s.Faults[i]
		p := fmt.Sprintf("faults[%d]", i)

		switch j, dup := first[f.Name]; {
		case dup:
			v.errorf(p+".name", "duplicate fault name %q (also faults[%d])", f.Name, j)
		case len(f.Name) > MaxNameLen:
			v.errorf(p+".name", "a name of %d characters: at most %d", len(f.Name), MaxNameLen)
		default:
			first[f.Name] = i
		}

		if f.Kind == "" {
			v.errorf(p+".kind", "required")
		}

		v.trigger(p, *f)

		// Every kind-specific parameter is the kind's own business.
		if f.Spec != nil {
			f.Spec.Validate(&FaultCheck{v: v, f: f})
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
	case f.At != nil:
		v.duration(p+".at", *f.At)
	}

	v.duration(p+".for", f.For)

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
		v.required(p+".state", v.states())
	} else {
		v.known(p+".state", w.State, "trigger state", v.states())
	}

	v.duration(p+".after", w.After)

	switch {
	case w.Count < 0 || w.Count > MaxCount:
		v.between(p+".count", int64(w.Count), 0, MaxCount)
	case w.Count > 0 && v.cat != nil && !v.cat.Counted(w.State):
		v.errorf(p+".count", "only counts with state %s, not %s", strings.Join(v.counted(), " or "), w.State)
	}
}

func (v *validator) expect() {
	e := v.s.Expect

	if e.Within.Duration <= 0 {
		v.errorf("expect.within", "must be positive")
	}

	v.duration("expect.within", e.Within)
	v.duration("expect.settle", e.Settle)
	v.duration("expect.stable", e.Stable)

	for _, l := range []struct {
		field string
		n     int
	}{{"expect.nodesInMaintenance", len(e.NodesInMaintenance)}, {"expect.diagnoses", len(e.Diagnoses)},
		{"expect.noDiagnoses", len(e.NoDiagnoses)}, {"expect.promotions", len(e.Promotions)}} {
		v.listLen(l.field, l.n)
	}

	okVoters := v.memberCount("expect.voters", e.Voters)
	okLearners := v.memberCount("expect.learners", e.Learners)

	v.consistent(e, okVoters && okLearners)

	if v.memberCount("expect.kubernetesEndpoints", e.KubernetesEndpoints) && e.KubernetesEndpoints != nil && !v.s.Cluster.Kubernetes {
		v.errorf("expect.kubernetesEndpoints", "needs cluster.kubernetes: true (without it no API server runs)")
	}

	switch {
	case e.NodesReady == nil:
	case *e.NodesReady < 0:
		v.errorf("expect.nodesReady", "must not be negative, got %d", *e.NodesReady)
	case v.nodes != nil && *e.NodesReady > len(v.nodes):
		v.errorf("expect.nodesReady", "%d is more than the %d nodes", *e.NodesReady, len(v.nodes))
	case !v.s.Cluster.Kubernetes:
		v.errorf("expect.nodesReady", "needs cluster.kubernetes: true (without it no kubelet registers a node)")
	}

	if e.SharedIP != "" {
		v.oneOf("expect.sharedIP", e.SharedIP, "shared IP state", []string{"held", "unheld"})
	}

	switch {
	case e.Upgraded == nil:
	case *e.Upgraded < 0:
		v.errorf("expect.upgraded", "must not be negative, got %d", *e.Upgraded)
	case v.nodes != nil && *e.Upgraded > len(v.nodes):
		v.errorf("expect.upgraded", "%d is more than the %d nodes", *e.Upgraded, len(v.nodes))
	case v.s.Orchestrator.UpgradeTo == "":
		v.errorf("expect.upgraded", "needs orchestrator.upgradeTo (without it no node is upgraded)")
	}

	for i, n := range e.NodesInMaintenance {
		v.node(fmt.Sprintf("expect.nodesInMaintenance[%d]", i), n)
	}

	for i, d := range e.Diagnoses {
		p := fmt.Sprintf("expect.diagnoses[%d]", i)

		if d.Code == "" {
			v.required(p+".code", v.codes())
		} else {
			v.known(p+".code", d.Code, "diagnosis code", v.codes())
		}

		if d.Node != "" {
			v.node(p+".node", d.Node)
		}
	}

	for i, code := range e.NoDiagnoses {
		p := fmt.Sprintf("expect.noDiagnoses[%d]", i)
		if v.known(p, code, "diagnosis code", v.codes()) &&
			slices.ContainsFunc(e.Diagnoses, func(d ExpectedDiagnosis) bool { return d.Code == code }) {
			v.errorf(p, "%q is also expected in expect.diagnoses", code)
		}
	}

	for i, p := range e.Promotions {
		field := fmt.Sprintf("expect.promotions[%d]", i)

		switch {
		case p.Node == "":
			v.errorf(field+".node", "required")
		case v.node(field+".node", p.Node) && !IsControlPlane(p.Node):
			v.errorf(field+".node", "%q is a worker, which runs no etcd member to promote: one of %s", p.Node, strings.Join(v.controlPlanes(), ", "))
		}

		v.duration(field+".atLeast", p.AtLeast)
		v.duration(field+".atMost", p.AtMost)

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

// memberCount checks an expected etcd member count: at most one member per
// control plane. It reports whether the count is usable for further checks.
func (v *validator) memberCount(field string, n *int) bool {
	switch {
	case n == nil:
	case *n < 0:
		v.errorf(field, "must not be negative, got %d", *n)

		return false
	case v.nodes != nil && *n > v.s.Cluster.ControlPlanes:
		v.errorf(field, "%d is more than the %d control planes", *n, v.s.Cluster.ControlPlanes)

		return false
	}

	return true
}

// consistent refuses expectations that cannot hold together: a scenario that
// can never pass is a mistake in the file, not a finding about Talos.
func (v *validator) consistent(e Expect, counts bool) {
	if v.nodes == nil || !counts {
		return
	}

	cps := v.s.Cluster.ControlPlanes

	if e.Voters != nil && e.Learners != nil && *e.Voters+*e.Learners > cps {
		v.errorf("expect.learners", "voters %d + learners %d is more than the %d control planes: each control plane is at most one etcd member",
			*e.Voters, *e.Learners, cps)
	}

	if e.Converged == nil || !*e.Converged {
		return
	}

	// Converged means every control plane is a voter and nothing is left in
	// maintenance.
	if e.Voters != nil && *e.Voters != cps {
		v.errorf("expect.voters", "%d contradicts converged: true, which means all %d control planes are voters", *e.Voters, cps)
	}

	if e.Learners != nil && *e.Learners != 0 {
		v.errorf("expect.learners", "%d contradicts converged: true, which means no learner is left", *e.Learners)
	}

	if len(e.NodesInMaintenance) > 0 {
		v.errorf("expect.nodesInMaintenance", "contradicts converged: true, which means every node left maintenance")
	}
}

// between checks lo <= n <= hi and reports whether it holds.
func (v *validator) between(field string, n, lo, hi int64) bool {
	if n < lo || n > hi {
		v.errorf(field, "must be between %d and %d, got %d", lo, hi, n)

		return false
	}

	return true
}

// duration checks a Talos-time duration against MaxDuration (durations from
// YAML are never negative; scenarios built in code may be).
func (v *validator) duration(field string, d Duration) {
	switch {
	case d.Duration < 0:
		v.errorf(field, "must not be negative, got %s", d)
	case d.Duration > MaxDuration:
		v.errorf(field, "%s is longer than %s, the longest a scenario can last", d, MaxDuration)
	}
}

// listLen bounds a list and reports whether it is within bounds.
func (v *validator) listLen(field string, n int) bool {
	limit := MaxListItems
	if field == "faults" {
		limit = MaxFaults
	}

	if n > limit {
		v.errorf(field, "%d items: at most %d", n, limit)

		return false
	}

	return true
}

// node checks that name is a node of the cluster and reports whether it is
// (false too when the cluster size itself is invalid).
func (v *validator) node(field, name string) bool {
	if v.nodes == nil {
		return false
	}

	if !slices.Contains(v.nodes, name) {
		v.errorf(field, "unknown node %q: one of %s", name, strings.Join(v.nodes, ", "))

		return false
	}

	return true
}

// oneOf checks that value is among allowed, naming what it is in the message.
func (v *validator) oneOf(field, value, what string, allowed []string) bool {
	if slices.Contains(allowed, value) {
		return true
	}

	v.errorf(field, "unknown %s %q: one of %s", what, value, strings.Join(allowed, ", "))

	return false
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

// states and codes are the catalogue's trigger states and diagnosis codes;
// nil without a catalogue, when they are not checked.
func (v *validator) states() []string {
	if v.cat == nil {
		return nil
	}

	return v.cat.TriggerStates()
}

func (v *validator) codes() []string {
	if v.cat == nil {
		return nil
	}

	return v.cat.DiagnosisCodes()
}

// required reports a missing name, with the names allowed when known.
func (v *validator) required(field string, allowed []string) {
	if allowed == nil {
		v.errorf(field, "required")

		return
	}

	v.errorf(field, "required: one of %s", strings.Join(allowed, ", "))
}

// known is oneOf for a name from the catalogue: without one, any name.
func (v *validator) known(field, value, what string, allowed []string) bool {
	return allowed == nil || v.oneOf(field, value, what, allowed)
}

// counted lists the trigger states that take a count.
func (v *validator) counted() []string {
	var out []string

	for _, s := range v.states() {
		if v.cat.Counted(s) {
			out = append(out, s)
		}
	}

	return out
}
