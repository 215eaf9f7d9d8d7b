package scenario_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/chaos"
	. "github.com/talchaos/talchaos/harness/scenario" //nolint:revive // the package under test
	"github.com/talchaos/talchaos/scenarios"
)

// parse and load read scenarios with the fault kinds of the catalogue, as the
// CLI does.
var (
	parse = chaos.Parse
	load  = chaos.Load
)

// full uses every section; the line numbers matter to the tests below.
const full = `apiVersion: talchaos/v1
kind: Scenario
name: learner-stuck
description: a learner that never catches up
reproduces: [seeds/issue-1.yaml]
timeScale: 10
cluster:
  controlPlanes: 3
  workers: 1
  nodes:
    cp2: {bootDelay: 5s}
    cp3:
      etcdImagePull: 1m
  etcd: {maxLearners: 1, snapshotCount: 100}
  workload: {writesPerSecond: 50}
orchestrator:
  name: naive
faults:
  - kind: partition
    nodes: [cp1, cp3]
    name: cut
    at: 0
    for: 90s
  - name: slow-peer
    kind: latency
    node: cp3
    port: etcd-peer
    latency: 200ms
    when: {node: cp3, state: learner, after: 1h30m}
expect:
  converged: false
  voters: 3
  learners: 0
  nodesInMaintenance: [w1]
  diagnoses:
    - code: learner-not-synced
      node: cp3
  noDiagnoses: [split-brain]
`

func TestParseFull(t *testing.T) {
	s, err := parse("full.yaml", []byte(full))
	if err != nil {
		t.Fatal(err)
	}

	check := func(name string, got, want any) {
		t.Helper()

		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}

	d := func(s string) Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}

		return Duration{v}
	}

	check("File", s.File, "full.yaml")
	check("Name", s.Name, "learner-stuck")
	check("Reproduces", s.Reproduces, []string{"seeds/issue-1.yaml"})
	check("Talos", s.Talos, DefaultProfile)
	check("TimeScale", s.TimeScale, 10.0)
	check("NodeNames", s.Cluster.NodeNames(), []string{"cp1", "cp2", "cp3", "w1"})
	check("Nodes", s.Cluster.Nodes, map[string]NodeOverride{
		"cp2": {EtcdImagePull: Duration{DefaultEtcdImagePull}, BootDelay: d("5s")},
		"cp3": {EtcdImagePull: d("1m")},
	})
	check("Etcd", s.Cluster.Etcd, Etcd{MaxLearners: 1, SnapshotCount: 100})
	check("Workload", s.Cluster.Workload, Workload{WritesPerSecond: 50, ValueBytes: 256})
	check("Orchestrator", s.Orchestrator, Orchestrator{Name: "naive", BootstrapNode: "cp1", Timeout: d("30m")})
	check("Within", s.Expect.Within, d("30m"))

	if len(s.Faults) != 2 {
		t.Fatalf("got %d faults", len(s.Faults))
	}

	zero := Duration{}
	check("Faults[0]", s.Faults[0], Fault{
		Name: "cut", Kind: "partition", Spec: chaos.Partition{Nodes: []chaos.Node{"cp1", "cp3"}},
		At: &zero, For: d("90s"), Line: 19, Index: 0,
	})
	check("Faults[1]", s.Faults[1], Fault{
		Name: "slow-peer", Kind: "latency", Spec: chaos.Latency{Node: "cp3", Port: "etcd-peer", Latency: d("200ms")},
		When: &When{Node: "cp3", State: "learner", After: d("1h30m")}, Line: 24, Index: 1,
	})

	no, three, none := false, 3, 0
	check("Expect", s.Expect, Expect{
		Within: d("30m"), Converged: &no, Voters: &three, Learners: &none,
		NodesInMaintenance: []string{"w1"},
		Diagnoses:          []ExpectedDiagnosis{{Code: "learner-not-synced", Node: "cp3"}},
		NoDiagnoses:        []string{"split-brain"},
		Settle:             d("30s"), Stable: d("30s"),
	})

	// Errors raised later by other packages point at the field, or at the fault when the
	// field is absent.
	check("Errorf field", s.Faults[1].Errorf(s, "latency", "too slow: %d", 1).Error(), "full.yaml:28: faults[1].latency: too slow: 1")
	check("Errorf absent", s.Faults[1].Errorf(s, "rateKBps", "required").Error(), "full.yaml:24: faults[1].rateKBps: required")
	check("Errorf fault", s.Faults[0].Errorf(s, "", "bad").Error(), "full.yaml:19: faults[0]: bad")
	check("Scenario.Errorf", s.Errorf("cluster.etcd.maxLearners", "x").Error(), "full.yaml:14: cluster.etcd.maxLearners: x")
	check("Errorf code-built", Fault{Index: 2, Line: 7}.Errorf(&Scenario{File: "f"}, "node", "x").Error(), "f:7: faults[2].node: x")
	check("Errorf nil", Fault{Index: 2, Line: 7}.Errorf(nil, "node", "x").Error(), ":7: faults[2].node: x")
}

func TestParseDefaults(t *testing.T) {
	s, err := parse("min.yaml", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: min\ncluster: {controlPlanes: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}

	if s.Talos != "v1.12" || s.TimeScale != 1 || s.Orchestrator.Name != "resilient" ||
		s.Orchestrator.BootstrapNode != "cp1" || s.Expect.Within.Duration != 30*time.Minute ||
		s.Orchestrator.Timeout.Duration != 30*time.Minute || s.Cluster.Workload.ValueBytes != 0 {
		t.Errorf("defaults not applied: %+v", s)
	}

	// The orchestrator timeout follows an explicit within.
	s, err = parse("min.yaml", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: min\ncluster: {controlPlanes: 1}\nexpect: {within: 5m}\n"))
	if err != nil {
		t.Fatal(err)
	}

	if s.Orchestrator.Timeout.Duration != 5*time.Minute {
		t.Errorf("timeout = %v, want 5m", s.Orchestrator.Timeout)
	}
}

func TestParseMergeKeys(t *testing.T) {
	s, err := parse("m.yaml", []byte(head+`faults:
  - &slow {kind: latency, node: cp1, port: etcd-peer, latency: 1s, at: 0}
  - <<: *slow
    name: other
    node: cp2
`))
	if err != nil {
		t.Fatal(err)
	}

	if f, ok := s.Faults[1].Spec.(chaos.Latency); !ok || s.Faults[1].Kind != "latency" || f.Node != "cp2" || s.Faults[1].Name != "other" ||
		f.Latency.Duration != time.Second || s.Faults[1].Line != 8 {
		t.Errorf("merged fault = %+v", s.Faults[1])
	}
}

// head is a valid scenario of 5 lines that cases extend from line 6.
const head = `apiVersion: talchaos/v1
kind: Scenario
name: t
cluster:
  controlPlanes: 3
`

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string // the error, or its first line, starts with this
	}{
		// File shape.
		{"empty", "", `t.yaml:1: empty scenario`},
		{"only comments", "# nothing\n", `t.yaml:1: empty scenario`},
		{"empty document", "---\n", `t.yaml:1: empty scenario`},
		{"list", "- a\n", `t.yaml:1: a scenario must be a mapping, got a list`},
		{"scalar", "\n\nhello\n", `t.yaml:3: a scenario must be a mapping, got "hello"`},
		// The line of a syntax error is yaml.v3's; for some errors (an unclosed
		// flow list) it names the line before the problem.
		{"syntax", "name: t\nkind: a: b\n", `t.yaml:2: invalid YAML: mapping values are not allowed in this context`},
		{"two documents", head + "---\n" + head, `t.yaml:6: more than one YAML document`},

		// Header.
		{"apiVersion", "apiVersion: talchaos/v2\nkind: Scenario\nname: t\ncluster: {controlPlanes: 1}\n",
			`t.yaml:1: apiVersion: must be "talchaos/v1", got "talchaos/v2"`},
		{"apiVersion missing", "kind: Scenario\nname: t\ncluster: {controlPlanes: 1}\n",
			`t.yaml:1: apiVersion: must be "talchaos/v1", got ""`},
		{"kind", "apiVersion: talchaos/v1\nkind: Cluster\nname: t\ncluster: {controlPlanes: 1}\n",
			`t.yaml:2: kind: must be "Scenario", got "Cluster"`},
		{"name missing", "\napiVersion: talchaos/v1\nkind: Scenario\ncluster: {controlPlanes: 1}\n", `t.yaml:2: name: required`},
		{"name invalid", "apiVersion: talchaos/v1\nkind: Scenario\nname: Bad_Name\ncluster: {controlPlanes: 1}\n",
			`t.yaml:3: name: invalid name "Bad_Name"`},
		{"name dash", "apiVersion: talchaos/v1\nkind: Scenario\nname: -x\ncluster: {controlPlanes: 1}\n", `t.yaml:3: name: invalid name`},
		{"talos", head + "talos: v9\n", `t.yaml:6: talos: unknown talos profile "v9": one of v1.12, v1.13, v1.14, main`},
		{"timeScale low", head + "timeScale: 0.5\n", `t.yaml:6: timeScale: must be between 1 and 10000, got 0.5`},
		{"timeScale high", head + "timeScale: 20000\n", `t.yaml:6: timeScale: must be between 1 and 10000`},
		{"timeScale nan", head + "timeScale: .nan\n", `t.yaml:6: timeScale: must be between 1 and 10000, got NaN`},

		// Cluster.
		{"cluster missing", "apiVersion: talchaos/v1\nkind: Scenario\nname: t\n", `t.yaml:1: cluster: required`},
		{"controlPlanes missing", "apiVersion: talchaos/v1\nkind: Scenario\nname: t\ncluster:\n  workers: 1\n",
			`t.yaml:4: cluster.controlPlanes: must be between 1 and 9, got 0`},
		{"controlPlanes high", "apiVersion: talchaos/v1\nkind: Scenario\nname: t\ncluster:\n  controlPlanes: 10\n",
			`t.yaml:5: cluster.controlPlanes: must be between 1 and 9, got 10`},
		{"workers negative", head + "  workers: -1\n", `t.yaml:6: cluster.workers: must be between 0 and 100, got -1`},
		{"workers high", head + "  workers: 101\n", `t.yaml:6: cluster.workers: must be between 0 and 100, got 101`},
		{"nodes unknown", head + "  nodes:\n    cp1: {}\n    cp4: {}\n", `t.yaml:8: cluster.nodes.cp4: unknown node "cp4": one of cp1, cp2, cp3`},
		{"nodes worker", head + "  nodes:\n    w1: {bootDelay: 1s}\n", `t.yaml:7: cluster.nodes.w1: unknown node "w1"`},
		{"maxLearners", head + "  etcd:\n    maxLearners: -1\n", `t.yaml:7: cluster.etcd.maxLearners: must be between 0 and 16, got -1`},
		{"snapshotCount", head + "  etcd:\n    snapshotCount: -1\n", `t.yaml:7: cluster.etcd.snapshotCount: expected a non-negative integer, -1 does not fit`},

		// Types.
		{"int type", head + "  workers: three\n", `t.yaml:6: cluster.workers: expected an integer, got "three"`},
		{"bool type", head + "expect:\n  converged: maybe\n", `t.yaml:7: expect.converged: expected true or false, got "maybe"`},
		{"list for int", head + "  workers: [1]\n", `t.yaml:6: cluster.workers: expected an integer, got a list`},
		{"scalar for mapping", head + "orchestrator: 3\n", `t.yaml:6: orchestrator: expected a mapping, got "3"`},
		{"scalar for list", head + "faults: {kind: x}\n", `t.yaml:6: faults: expected a list, got a mapping`},
		{"mapping for string", head + "talos: {a: 1}\n", `t.yaml:6: talos: expected a string, got a mapping`},
		{"duplicate key", head + "  workers: 1\n  workers: 2\n", `t.yaml:7: cluster.workers: duplicate field "workers" (first on line 6)`},
		{"self merge", head + "expect: &e\n  within: 1m\n  <<: *e\n", `t.yaml:8: expect: alias *e refers to itself`},

		// Unknown fields.
		{"unknown top", head + "foo: 1\n", `t.yaml:6: foo: unknown field "foo"`},
		{"unknown case", "apiVersion: talchaos/v1\nkind: Scenario\nname: t\ncluster:\n  controlplanes: 3\n",
			`t.yaml:5: cluster.controlplanes: unknown field "controlplanes" (did you mean "controlPlanes"?)`},
		{"unknown node field", head + "  nodes:\n    cp1:\n      pull: 1s\n", `t.yaml:8: cluster.nodes.cp1.pull: unknown field "pull"`},
		{"unknown yaml-ignored", head + "file: x.yaml\n", `t.yaml:6: file: unknown field "file"`},
		{"unknown in fault", head + "faults:\n  - {kind: reboot, node: cp1, at: 0}\n  - kind: reboot\n    at: 1m\n    nod: cp1\n",
			`t.yaml:10: faults[1].nod: unknown field "nod"`},
		{"unknown in when", head + "faults:\n  - kind: reboot\n    when: {node: cp1, state: member, delay: 1s}\n    node: cp1\n",
			`t.yaml:8: faults[0].when.delay: unknown field "delay"`},
		{"unknown in diagnoses", head + "expect:\n  diagnoses:\n    - code: split-brain\n      reason: x\n",
			`t.yaml:9: expect.diagnoses[0].reason: unknown field "reason"`},

		// Orchestrator.
		{"orchestrator name", head + "orchestrator: {name: clever}\n", `t.yaml:6: orchestrator.name: unknown orchestrator "clever": one of resilient, naive, exec`},
		{"exec command", head + "orchestrator:\n  name: exec\n", `t.yaml:6: orchestrator.command: required by the exec orchestrator`},
		{"exec empty command", head + "orchestrator:\n  name: exec\n  command: ['']\n", `t.yaml:8: orchestrator.command: required`},
		{"command without exec", head + "orchestrator:\n  command: [./bootstrap]\n", `t.yaml:7: orchestrator.command: only used by the exec orchestrator, not "resilient"`},
		{"bootstrapNode worker", head + "  workers: 1\norchestrator:\n  bootstrapNode: w1\n",
			`t.yaml:8: orchestrator.bootstrapNode: "w1" is not a control-plane node: one of cp1, cp2, cp3`},
		{"bootstrapNode unknown", head + "orchestrator:\n  bootstrapNode: cp4\n", `t.yaml:7: orchestrator.bootstrapNode: "cp4" is not a control-plane node`},

		// Faults.
		{"fault name duplicate", head + "faults:\n  - {name: a, kind: reboot, node: cp1, at: 0}\n  - {name: a, kind: reboot, node: cp1, at: 0}\n",
			`t.yaml:8: faults[1].name: duplicate fault name "a" (also faults[0])`},
		{"fault default name duplicate", head + "faults:\n  - {name: reboot-1, kind: reboot, node: cp1, at: 0}\n  - {kind: reboot, node: cp1, at: 0}\n",
			`t.yaml:8: faults[1].name: duplicate fault name "reboot-1" (also faults[0])`},
		{"fault kind", head + "faults:\n  - node: cp1\n    at: 0\n", `t.yaml:7: faults[0].kind: required`},
		{"fault node", head + "faults:\n  - kind: reboot\n    node: cp9\n    at: 0\n", `t.yaml:8: faults[0].node: unknown node "cp9": one of cp1, cp2, cp3`},
		{"fault nodes", head + "faults:\n  - kind: partition\n    nodes:\n      - cp1\n      - w1\n    at: 0\n", `t.yaml:10: faults[0].nodes[1]: unknown node "w1"`},
		{"fault port", head + "faults:\n  - kind: blackhole\n    port: ssh\n    node: cp1\n    at: 0\n", `t.yaml:8: faults[0].port: unknown port "ssh": one of talos-api, etcd-client, etcd-peer`},
		{"fault direction", head + "faults:\n  - kind: blackhole\n    direction: sideways\n    node: cp1\n    port: etcd-peer\n    at: 0\n", `t.yaml:8: faults[0].direction: unknown direction "sideways": one of upstream, downstream, both`},
		{"fault no trigger", head + "faults:\n  - {kind: reboot, node: cp1, at: 0}\n  - kind: reboot\n    node: cp1\n", `t.yaml:8: faults[1]: needs a trigger: at or when`},
		{"fault null when", head + "faults:\n  - kind: reboot\n    when:\n    node: cp1\n", `t.yaml:7: faults[0]: needs a trigger: at or when`},
		{"fault both triggers", head + "faults:\n  - kind: reboot\n    at: 1m\n    when: {node: cp1, state: member}\n    node: cp1\n", `t.yaml:9: faults[0].when: cannot be combined with at`},
		{"when node unknown", head + "faults:\n  - kind: reboot\n    node: cp1\n    when:\n      node: cp5\n      state: member\n", `t.yaml:10: faults[0].when.node: unknown node "cp5"`},
		{"when node missing", head + "faults:\n  - kind: reboot\n    node: cp1\n    when:\n      state: member\n", `t.yaml:9: faults[0].when.node: required`},
		{"when state", head + "faults:\n  - kind: reboot\n    node: cp1\n    when:\n      node: cp1\n      state: sleeping\n",
			`t.yaml:11: faults[0].when.state: unknown trigger state "sleeping": one of bootstrapped, etcd-running, `},
		{"when state missing", head + "faults:\n  - kind: reboot\n    when: {node: cp1}\n    node: cp1\n", `t.yaml:8: faults[0].when.state: required: one of bootstrapped, etcd-running`},
		{"fault count", head + "faults:\n  - kind: api-fail\n    node: cp1\n    rpc: Bootstrap\n    code: Unavailable\n    at: 0\n    count: -2\n", `t.yaml:12: faults[0].count: must be between 0 and 10000, got -2`},
		{"fault rate", head + "faults:\n  - kind: bandwidth\n    node: cp1\n    port: etcd-peer\n    at: 0\n    rateKBps: -2\n", `t.yaml:11: faults[0].rateKBps: must be between 1 and 10000000, got -2`},
		{"fault for", head + "faults:\n  - kind: reboot\n    at: 0\n    for: ten minutes\n",
			`t.yaml:9: faults[0].for: invalid duration "ten minutes": time: invalid duration "ten minutes"`},
		{"fault for negative", head + "faults:\n  - kind: reboot\n    at: 0\n    for: -10s\n", `t.yaml:9: faults[0].for: negative duration "-10s"`},
		{"fault for list", head + "faults:\n  - kind: reboot\n    at: 0\n    for: [1]\n", `t.yaml:9: faults[0].for: expected a duration like "90s", got a list`},
		{"fault at unitless", head + "faults:\n  - kind: reboot\n    at: 90\n", `t.yaml:8: faults[0].at: duration 90 needs a unit, e.g. "90s"`},

		// Heal triggers, orchestrator options, patches, promotions.
		{"until with for", head + "faults:\n  - kind: reboot\n    node: cp1\n    at: 0\n    for: 1m\n    until: {node: cp1, state: voter}\n",
			`t.yaml:11: faults[0].until: cannot be combined with for`},
		{"until state", head + "faults:\n  - kind: reboot\n    node: cp1\n    at: 0\n    until: {node: cp1, state: asleep}\n",
			`t.yaml:10: faults[0].until.state: unknown trigger state "asleep"`},
		{"count on another state", head + "faults:\n  - kind: reboot\n    node: cp1\n    when:\n      node: cp1\n      state: learner\n      count: 3\n",
			`t.yaml:12: faults[0].when.count: only counts with state promote-refused, not learner`},
		{"negative count", head + "faults:\n  - kind: reboot\n    node: cp1\n    at: 0\n    until:\n      node: cp1\n      state: promote-refused\n      count: -1\n",
			`t.yaml:13: faults[0].until.count: must be between 0 and 10000, got -1`},
		{"upgradeTo not an image", head + "orchestrator:\n  upgradeTo: \"Not An Image\"\n",
			`t.yaml:7: orchestrator.upgradeTo: "Not An Image" is not an installer image to upgrade to: invalid reference format`},
		{"upgradeTo without a version", head + "orchestrator:\n  upgradeTo: ghcr.io/siderolabs/installer:latest\n",
			`t.yaml:7: orchestrator.upgradeTo: "ghcr.io/siderolabs/installer:latest" is not an installer image to upgrade to: its tag must be the Talos version it installs`},
		{"upgraded without upgradeTo", head + "expect:\n  upgraded: 1\n",
			`t.yaml:7: expect.upgraded: needs orchestrator.upgradeTo`},
		{"upgraded more than the nodes", head + "orchestrator:\n  upgradeTo: ghcr.io/siderolabs/installer:v1.12.7\nexpect:\n  upgraded: 4\n",
			`t.yaml:9: expect.upgraded: 4 is more than the 3 nodes`},
		{"bootstrapNodes with resilient", head + "orchestrator:\n  bootstrapNodes: [cp1, cp2]\n",
			`t.yaml:7: orchestrator.bootstrapNodes: only used by the naive orchestrator, not "resilient"`},
		{"bootstrapNodes worker", head + "  workers: 1\norchestrator:\n  name: naive\n  bootstrapNodes: [cp1, w1]\n",
			`t.yaml:9: orchestrator.bootstrapNodes[1]: "w1" is not a control-plane node`},
		{"endpoint unknown", head + "orchestrator:\n  name: naive\n  endpoint: vip\n",
			`t.yaml:8: orchestrator.endpoint: unknown Talos API endpoint "vip": "cluster" (the cluster's endpoint), or leave it out for each node's own address`},
		{"endpoint with resilient", head + "  network: {addresses: [10.119.0.11/24], endpoint: 10.119.0.10}\norchestrator:\n  endpoint: cluster\n",
			`t.yaml:8: orchestrator.endpoint: only used by the naive orchestrator, not "resilient"`},
		{"endpoint without the cluster's", head + "orchestrator:\n  name: naive\n  endpoint: cluster\n",
			`t.yaml:8: orchestrator.endpoint: "cluster" needs cluster.network.endpoint: the address the calls go to`},
		{"talosconfig source", head + "orchestrator:\n  talosconfig: borrowed\n",
			`t.yaml:7: orchestrator.talosconfig: unknown talosconfig source "borrowed"`},
		{"config patch empty", head + "  configPatches:\n    - nodes: [cp1]\n",
			`t.yaml:7: cluster.configPatches[0].patch: required`},
		{"config patch node", head + "  configPatches:\n    - nodes: [cp9]\n      patch: 'machine: {}'\n",
			`t.yaml:7: cluster.configPatches[0].nodes[0]: unknown node "cp9"`},
		{"promotion node", head + "expect:\n  promotions:\n    - {atMost: 1m}\n",
			`t.yaml:8: expect.promotions[0].node: required`},
		{"promotion bounds", head + "expect:\n  promotions:\n    - {node: cp2, atLeast: 2m, atMost: 1m}\n",
			`t.yaml:8: expect.promotions[0].atLeast: 2m0s is more than atMost 1m0s`},

		// Expect.
		{"within negative", head + "expect:\n  within: -1m\n", `t.yaml:7: expect.within: negative duration "-1m"`},
		{"voters", head + "expect:\n  voters: 4\n", `t.yaml:7: expect.voters: 4 is more than the 3 control planes`},
		{"learners", head + "expect:\n  learners: -1\n", `t.yaml:7: expect.learners: must not be negative, got -1`},
		{"shared IP state", head + "expect:\n  sharedIP: lost\n",
			`t.yaml:7: expect.sharedIP: unknown shared IP state "lost": one of held, unheld`},
		{"kubernetes endpoints without kubernetes", head + "expect:\n  kubernetesEndpoints: 3\n",
			`t.yaml:7: expect.kubernetesEndpoints: needs cluster.kubernetes: true (without it no API server runs)`},
		{"kubernetes endpoints", head + "  kubernetes: true\nexpect:\n  kubernetesEndpoints: 4\n",
			`t.yaml:8: expect.kubernetesEndpoints: 4 is more than the 3 control planes`},
		{"maintenance", head + "expect:\n  nodesInMaintenance: [cp1, w2]\n", `t.yaml:7: expect.nodesInMaintenance[1]: unknown node "w2"`},
		{"diagnosis code missing", head + "expect:\n  diagnoses:\n    - node: cp1\n", `t.yaml:8: expect.diagnoses[0].code: required: one of api-unreachable, apiserver-crash-loop, apiserver-not-in-service`},
		{"diagnosis code", head + "expect:\n  diagnoses:\n    - code: on-fire\n", `t.yaml:8: expect.diagnoses[0].code: unknown diagnosis code "on-fire": one of api-unreachable, apiserver-crash-loop, apiserver-not-in-service`},
		{"diagnosis node", head + "expect:\n  diagnoses:\n    - code: split-brain\n      node: cp7\n", `t.yaml:9: expect.diagnoses[0].node: unknown node "cp7"`},
		{"noDiagnoses", head + "expect:\n  noDiagnoses:\n    - split-brain\n    - meltdown\n", `t.yaml:9: expect.noDiagnoses[1]: unknown diagnosis code "meltdown"`},
		{"noDiagnoses contradiction", head + "expect:\n  diagnoses: [{code: no-quorum}]\n  noDiagnoses: [no-quorum]\n",
			`t.yaml:8: expect.noDiagnoses[0]: "no-quorum" is also expected in expect.diagnoses`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parse("t.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error, want %q; got %+v", tc.want, s)
			}

			if s != nil {
				t.Errorf("scenario returned with an error")
			}

			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error: %v", err, err)
			}

			if !strings.HasPrefix(e.Error(), tc.want) {
				t.Errorf("first error:\n  %v\nwant prefix:\n  %s\nall errors:\n%v", e, tc.want, err)
			}
		})
	}
}

// A small file whose aliases expand to a million values is refused quickly.
func TestParseAliasBomb(t *testing.T) {
	bomb := head + "faults: [&f {kind: partition, at: 0, nodes: [cp1" + strings.Repeat(",cp1", 999) + "]}" + strings.Repeat(",*f", 999) + "]\n"

	start := time.Now()

	_, err := parse("t.yaml", []byte(bomb))
	if err == nil || !strings.Contains(err.Error(), "document too large once aliases are expanded") {
		t.Errorf("got %v", err)
	}

	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestParseSeveralErrors(t *testing.T) {
	_, err := parse("t.yaml", []byte(strings.Replace(head, "Scenario", "Cluster", 1)+"timeScale: 0.5\nfaults:\n  - kind: reboot\n    node: cp1\n"))

	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("want Errors, got %T: %v", err, err)
	}

	want := `t.yaml:2: kind: must be "Scenario", got "Cluster"
t.yaml:6: timeScale: must be between 1 and 10000, got 0.5
t.yaml:8: faults[0]: needs a trigger: at or when`
	if err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}

	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || e.Field != "kind" {
		t.Errorf("errors.As gave %v, want the kind error", e)
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{File: "scenarios/x.yaml", Line: 12, Field: "faults[0].for", Msg: "bad"}
	if got := e.Error(); got != "scenarios/x.yaml:12: faults[0].for: bad" {
		t.Errorf("got %q", got)
	}

	e.Field = ""
	if got := e.Error(); got != "scenarios/x.yaml:12: bad" {
		t.Errorf("got %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()

	missing := filepath.Join(dir, "nope.yaml")
	if _, err := load(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("load(missing) = %v, want a not-exist error naming %s", err, missing)
	}

	path := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}

	s, err := load(path)
	if err != nil {
		t.Fatal(err)
	}

	if s.File != path {
		t.Errorf("File = %q, want %q", s.File, path)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(head+"foo: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":6: foo: ") {
		t.Errorf("load(bad) = %v", err)
	}
}

func TestNodeNames(t *testing.T) {
	if got := (Cluster{ControlPlanes: 2, Workers: 2}).NodeNames(); !reflect.DeepEqual(got, []string{"cp1", "cp2", "w1", "w2"}) {
		t.Errorf("NodeNames = %v", got)
	}

	if got := (Cluster{ControlPlanes: -1, Workers: -1}).NodeNames(); len(got) != 0 {
		t.Errorf("NodeNames of negative counts = %v", got)
	}

	for name, want := range map[string]bool{"cp1": true, "cp12": true, "cp": false, "cp0": false, "cp01": false, "w1": false, "cpx": false, "": false} {
		if IsControlPlane(name) != want {
			t.Errorf("IsControlPlane(%q) = %v", name, !want)
		}
	}
}

// FuzzParse: whatever the bytes, parsing ends, never panics, and a refusal is
// an input error (exit code 2) naming a line. The seed corpus is the built-in
// scenarios, every kind's example and a few hostile shapes; make test fuzzes
// for a bounded time on top.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{full, head, head + "faults:\n  - <<: [*a]\n", "a: &a [*a]", "{", "- - -", "cluster: {nodes: {? [a]: 1}}",
		head + "  nodes:\n    cp2: {<<: [&a0 {bootDelay: 0s}, &a1 {<<: [*a0, *a0, *a0]}, &a2 {<<: [*a1, *a1, *a1]}]}\n"} {
		f.Add([]byte(seed))
	}

	for _, name := range scenarios.Names() {
		data, _, err := scenarios.Read(name)
		if err != nil {
			f.Fatal(err)
		}

		f.Add(data)
	}

	for _, k := range chaos.Kinds {
		f.Add([]byte(head + "faults:\n  - " + k.Example() + "\n"))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse("f.yaml", data)
		if (s == nil) == (err == nil) {
			t.Fatalf("Parse returned %v and %v", s, err)
		}

		if err == nil {
			return
		}

		var e *Error
		if !errors.As(err, &e) || e.File != "f.yaml" || e.Line < 1 {
			t.Fatalf("not an input error naming file and line: %T %v", err, err)
		}

		if strings.Contains(err.Error(), "internal error") {
			t.Fatal(err)
		}
	})
}
