package chaos

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/sim"
)

// fakeTarget has the capabilities it is given, everywhere but on the nodes
// it lacks them on.
type fakeTarget struct {
	caps       []target.Capability
	disposable bool
	missingOn  map[string]bool
}

func (f fakeTarget) Name() string                         { return "fake" }
func (f fakeTarget) Capabilities() []target.Capability    { return f.caps }
func (f fakeTarget) Disposable() bool                     { return f.disposable }
func (f fakeTarget) Check(*scenario.Scenario) error       { return nil }
func (f fakeTarget) TimeScale(*scenario.Scenario) float64 { return 1 }
func (f fakeTarget) Supports(c target.Capability, node string) error {
	if f.missingOn[node] {
		return errors.New("no provider for " + node)
	}

	return target.Has(f, c)
}

func (f fakeTarget) Provision(context.Context, *scenario.Scenario, target.Options) (target.Cluster, error) {
	return nil, nil
}

func parse(t *testing.T, faults string) *scenario.Scenario {
	t.Helper()

	sc, err := Parse("s.yaml", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: s\ncluster:\n  controlPlanes: 3\nfaults:\n"+faults))
	if err != nil {
		t.Fatal(err)
	}

	return sc
}

func TestPlan(t *testing.T) {
	simT := fakeTarget{caps: sim.Target{}.Capabilities(), disposable: true}
	realT := fakeTarget{caps: []target.Capability{target.ToxicOn(target.PortTalosAPI), target.ProcessCap(target.RebootNode), target.ProcessCap(target.PowerOff)},
		missingOn: map[string]bool{"cp3": true}}

	for _, tc := range []struct {
		name, faults string
		tgt          target.Target
		allow        bool
		wantErr      string
	}{
		{"blackhole", "  - {kind: blackhole, node: cp2, port: etcd-peer, at: 1m}\n", simT, false, ""},
		{"unsupported port", "  - {kind: latency, node: cp2, port: etcd-peer, latency: 50ms, at: 1m}\n", realT, false,
			"s.yaml:7: faults[0].kind: target fake cannot inject latency: target fake cannot carry out toxic:etcd-peer"},
		{"supported port", "  - {kind: latency, node: cp2, port: talos-api, latency: 50ms, at: 1m}\n", realT, false, ""},
		{"destructive refused", "  - {kind: reboot, node: cp2, at: 1m}\n", realT, false,
			"faults[0].kind: reboot is destructive on the fake target's nodes, which outlive the run: pass --allow-destructive"},
		{"destructive allowed", "  - {kind: reboot, node: cp2, at: 1m}\n", realT, true, ""},
		{"destructive on disposable nodes", "  - {kind: reboot, node: cp2, at: 1m}\n", simT, false, ""},
		{"not on that node", "  - {kind: power-off, node: cp3, at: 1m}\n", realT, true, "cannot inject power-off: no provider for cp3"},
		{"every error at once", "  - {kind: crash-etcd, node: cp2, at: 1m}\n  - {kind: partition, nodes: [cp1, cp2], at: 1m}\n", realT, true,
			"s.yaml:7: faults[0].kind: target fake cannot inject crash-etcd: target fake cannot carry out process:crash-etcd\n" +
				"s.yaml:8: faults[1].kind: target fake cannot inject partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(parse(t, tc.faults), tc.tgt, PlanOptions{Seed: 1, AllowDestructive: tc.allow})

			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A rolling upgrade reboots every node into another version: refused on
// nodes that outlive the run without --allow-destructive, named by its field.
func TestPlanUpgradeIsDestructive(t *testing.T) {
	sc, err := Parse("s.yaml", []byte("apiVersion: talchaos/v1\nkind: Scenario\nname: s\ncluster:\n  controlPlanes: 3\norchestrator:\n  upgradeTo: ghcr.io/siderolabs/installer:v1.12.7\n"))
	if err != nil {
		t.Fatal(err)
	}

	realT := fakeTarget{caps: []target.Capability{target.ProcessCap(target.RebootNode)}}

	_, err = Plan(sc, realT, PlanOptions{Seed: 1})
	if want := "s.yaml:7: orchestrator.upgradeTo: upgrading reboots every node into another Talos version, destructive on the fake target's nodes"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}

	if _, err := Plan(sc, realT, PlanOptions{Seed: 1, AllowDestructive: true}); err != nil {
		t.Errorf("allowed: %v", err)
	}

	if _, err := Plan(sc, fakeTarget{disposable: true}, PlanOptions{Seed: 1}); err != nil {
		t.Errorf("disposable nodes: %v", err)
	}
}

// "random" is resolved by the seed, the same way every time, to a control
// plane other than the bootstrap node; other faults' choices do not move.
func TestPlanRandomNode(t *testing.T) {
	sc := parse(t, "  - {kind: isolate, node: random, at: 0s}\n  - {kind: reboot, node: random, at: 1m}\n")
	tgt := fakeTarget{caps: sim.Target{}.Capabilities(), disposable: true}

	seen := map[string]bool{}

	for seed := range int64(20) {
		a, err := Plan(sc, tgt, PlanOptions{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}

		b, _ := Plan(sc, tgt, PlanOptions{Seed: seed})

		for i := range a {
			if a[i].Node() != b[i].Node() || a[i].Seed != b[i].Seed {
				t.Fatalf("seed %d: plans differ: %s/%s", seed, a[i].Node(), b[i].Node())
			}

			if n := a[i].Node(); n != "cp2" && n != "cp3" {
				t.Fatalf("seed %d picked %s", seed, n)
			}

			if got := NodesOf(a[i].Spec.Spec.(Kind)); len(got) != 1 || got[0] != a[i].Node() {
				t.Fatalf("the fault's own parameters name %v, the plan %s", got, a[i].Node())
			}

			seen[a[i].Node()] = true
		}
	}

	if len(seen) != 2 {
		t.Errorf("20 seeds picked only %v", seen)
	}
}

// The catalogue documents itself: every kind has a name, a doc line, docs for
// each parameter and an example that is a valid fault of that kind.
func TestKindsAreDocumented(t *testing.T) {
	names := map[string]bool{}

	for _, k := range Kinds {
		name := k.Kind()
		if name == "" || names[name] {
			t.Fatalf("kind %T: empty or duplicate name %q", k, name)
		}

		names[name] = true

		if k.Doc() == "" {
			t.Errorf("%s: no doc", name)
		}

		for _, p := range Params(k) {
			if p.Name == "" || p.Doc == "" {
				t.Errorf("%s: parameter %q has no yaml name or no doc", name, p.Name)
			}
		}

		sc, err := ParseExample(k)
		if err != nil {
			t.Errorf("%s: example %s: %v", name, k.Example(), err)

			continue
		}

		if len(sc.Faults) != 1 || sc.Faults[0].Kind != name {
			t.Errorf("%s: example is not one fault of the kind: %s", name, k.Example())

			continue
		}

		if len(sc.Faults[0].Spec.(Kind).Needs(sc)) == 0 {
			t.Errorf("%s: needs no capability", name)
		}

		if got, ok := Lookup(name); !ok || got.Kind() != name {
			t.Errorf("Lookup(%s) = %v, %v", name, got, ok)
		}
	}
}

// What a target with the real target's capabilities is listed as supporting.
func TestSupport(t *testing.T) {
	caps := []target.Capability{target.ToxicOn(target.PortTalosAPI), target.InterceptEngine("ApplyConfiguration"),
		target.InterceptEngine("Bootstrap"), target.IsolateNode}

	for kind, want := range map[string]string{
		"latency":   "port talos-api only",
		"api-fail":  "rpc ApplyConfiguration, Bootstrap only",
		"isolate":   "yes",
		"partition": "no",
	} {
		k, _ := Lookup(kind)
		if got := Support(k, caps); got != want {
			t.Errorf("Support(%s) = %q, want %q", kind, got, want)
		}
	}
}

func TestHolds(t *testing.T) {
	o := history.NewObservation(0, []string{"cp1", "cp2", "cp3"})
	members := []history.Member{
		{ID: 1, Hostname: "cp1", PeerURLs: []string{"https://127.0.9.2:2380"}},
		{ID: 2, Hostname: "", PeerURLs: []string{"https://127.0.9.3:2380"}, IsLearner: true},
	}
	o.Nodes["cp1"] = &history.NodeObservation{Name: "cp1", Address: "127.0.9.2", Mode: history.ModeConfigured, Etcd: &history.Service{State: "Running"}, Members: members[:1]}
	o.Nodes["cp2"] = &history.NodeObservation{Name: "cp2", Address: "127.0.9.3", Mode: history.ModeConfigured, Etcd: &history.Service{State: "Preparing"}}
	o.Nodes["cp3"] = &history.NodeObservation{Name: "cp3", Address: "127.0.9.4", Mode: history.ModeMaintenance}

	// cp1 saw itself alone first; a later view includes the new learner.
	o.Nodes["cp1"].Members = members

	for _, tc := range []struct {
		node, state string
		count       int
		want        bool
	}{
		{"cp1", "voter", 0, true},
		{"cp1", "etcd-running", 0, true},
		{"cp2", "learner", 0, true}, // an unstarted learner is found by its peer URL
		{"cp2", "member", 0, true},
		{"cp2", "voter", 0, false},
		{"cp2", "left-maintenance", 0, true},
		{"cp3", "left-maintenance", 0, false},
		{"cp3", "member", 0, false},
		{"cp1", "bootstrapped", 0, false}, // two members now
		{"cp2", "promote-refused", 0, true},
		{"cp2", "promote-refused", 2, true},
		{"cp2", "promote-refused", 3, false},
		{"cp1", "promote-refused", 0, false},
	} {
		if got := Holds(viewOf(o, map[string]int{"cp2": 2}), scenario.When{Node: tc.node, State: tc.state, Count: tc.count}); got != tc.want {
			t.Errorf("Holds(%s, %s, %d) = %v, want %v", tc.node, tc.state, tc.count, got, tc.want)
		}
	}
}

// Each kind refuses what does not belong to it, with file:line:field. Every
// kind of the catalogue has cases here (checked at the end).
func TestValidation(t *testing.T) {
	const head = "apiVersion: talchaos/v1\nkind: Scenario\nname: s\ncluster: {controlPlanes: 3, workers: 1}\nfaults:\n"

	cases := []struct{ kind, fault, want string }{
		{"latency", "{kind: latency, node: cp2, port: etcd-peer, at: 0s}", "faults[0].latency: required: a duration between 1ms and 1m0s"},
		{"latency", "{kind: latency, node: cp2, port: etcd-peer, latency: 2562047h, at: 0s}", "faults[0].latency: must be between 1ms and 1m0s, got 2562047h0m0s"},
		{"latency", "{kind: latency, node: cp2, port: etcd-peer, latency: 10ms, jitter: 20ms, at: 0s}", "faults[0].jitter: 20ms is larger than the latency 10ms"},
		{"latency", "{kind: latency, node: w1, port: etcd-peer, latency: 10ms, at: 0s}", "faults[0].port: w1 is a worker, which runs no etcd"},
		{"bandwidth", "{kind: bandwidth, node: cp2, port: etcd-peer, at: 0s}", "faults[0].rateKBps: must be between 1 and 10000000, got 0"},
		{"bandwidth", "{kind: bandwidth, node: cp2, port: ssh, rateKBps: 1, at: 0s}", `faults[0].port: unknown port "ssh": one of talos-api, etcd-client, etcd-peer`},
		{"blackhole", "{kind: blackhole, node: cp2, at: 0s}", "faults[0].port: required: one of talos-api, etcd-client, etcd-peer"},
		{"blackhole", "{kind: blackhole, node: cp2, port: talos-api, direction: sideways, at: 0s}", `faults[0].direction: unknown direction "sideways"`},
		{"reset", "{kind: reset, port: talos-api, at: 0s}", "faults[0].node: required: a node name or random"},
		{"reset", "{kind: reset, node: cp2, port: talos-api, latency: 1s, at: 0s}", `faults[0].latency: "latency" does not apply to kind reset (it is a field of latency); reset takes node, port, direction`},
		{"slow-close", "{kind: slow-close, node: cp2, port: talos-api, at: 0s}", "faults[0].delay: required"},
		{"partition", "{kind: partition, nodes: [cp1], at: 0s}", "faults[0].nodes: needs exactly two nodes"},
		{"partition", "{kind: partition, nodes: [cp1, cp1], at: 0s}", "faults[0].nodes[1]: cp1 twice"},
		{"partition", "{kind: partition, nodes: [cp1, random], at: 0s}", `faults[0].nodes[1]: unknown node "random"`},
		{"partition", "{kind: partition, node: cp1, nodes: [cp1, cp2], at: 0s}", `faults[0].node: "node" does not apply to kind partition`},
		{"isolate", "{kind: isolate, node: cp9, at: 0s}", `faults[0].node: unknown node "cp9": one of cp1, cp2, cp3, w1`},
		{"crash-etcd", "{kind: crash-etcd, node: w1, at: 0s}", `faults[0].node: "w1" is a worker, which runs no etcd: crash-etcd kills etcd`},
		{"pause-etcd", "{kind: pause-etcd, node: w1, at: 0s}", `faults[0].node: "w1" is a worker`},
		{"pause-node", "{kind: pause-node, node: cp9, at: 0s}", `faults[0].node: unknown node "cp9"`},
		{"reboot", "{kind: reboot, at: 0s}", "faults[0].node: required"},
		{"power-off", "{kind: power-off, node: cp2, port: talos-api, at: 0s}", `faults[0].port: "port" does not apply to kind power-off`},
		{"wipe-etcd", "{kind: wipe-etcd, node: w1, at: 0s}", `faults[0].node: "w1" is a worker`},
		{"reset-node", "{kind: reset-node, node: cp2, graceful: yes please, at: 0s}", `faults[0].graceful: expected true or false, got "yes please"`},
		{"remove-member", "{kind: remove-member, node: w1, at: 0s}", `faults[0].node: "w1" is a worker, which runs no etcd: remove-member removes an etcd member`},
		{"api-fail", "{kind: api-fail, node: cp2, rpc: ApplyConfiguration, code: OK, at: 0s}", "faults[0].code: OK is no failure"},
		{"api-fail", "{kind: api-fail, node: cp2, rpc: ApplyConfiguration, code: Unavailable, count: 0.9, at: 0s}", `faults[0].count: expected an integer, got "0.9"`},
		{"api-fail", "{kind: api-fail, node: cp2, rpc: ApplyConfiguration, code: Unavailable, port: talos-api, at: 0s}",
			`faults[0].port: "port" does not apply to kind api-fail (it is a field of latency); api-fail takes node, rpc, code, count`},
		{"api-fail", "{kind: api-fail, node: cp2, rpc: ApplyConfiguration, code: Unavailable, rateKBps: 5, at: 0s}", `faults[0].rateKBps: "rateKBps" does not apply to kind api-fail`},
		{"api-fail", "{kind: api-fail, node: w1, rpc: MemberPromote, code: Unavailable, at: 0s}", `faults[0].node: "w1" is a worker, which runs no etcd: MemberPromote is called by a joining control plane's own Talos`},
		{"api-fail", "{kind: api-fail, node: cp2, rpc: Reboot, code: Unavailable, at: 0s}", `faults[0].rpc: unknown rpc "Reboot"`},
		{"api-drop-reply", "{kind: api-drop-reply, node: cp2, rpc: Bootstrap, count: 100000, at: 0s}", "faults[0].count: must be between 0 and 10000, got 100000"},
		{"api-delay", "{kind: api-delay, node: cp2, rpc: Bootstrap, at: 0s}", "faults[0].delay: required: a duration between 1ms and 1h0m0s"},
		{"time-unsynced", "{kind: time-unsynced, node: cp7, at: 0s}", `faults[0].node: unknown node "cp7"`},
		{"time-unsynced", "{kind: time-unsynced, node: cp1, rpc: Bootstrap, at: 0s}", `faults[0].rpc: "rpc" does not apply to kind time-unsynced`},
		{"image-missing", "{kind: image-missing, image: ghcr.io/Siderolabs/installer:v1.12.7, at: 0s}", `faults[0].image: "ghcr.io/Siderolabs/installer:v1.12.7" is not an image reference: invalid reference format: repository name (Siderolabs/installer) must be lowercase`},
		{"image-missing", "{kind: image-missing, node: cp1, at: 0s}", `faults[0].node: "node" does not apply to kind image-missing`},
		{"clock-offset", "{kind: clock-offset, node: cp2, at: 0s}", "faults[0].ahead: required: ahead or behind, a duration up to 876000h0m0s"},
		{"clock-offset", "{kind: clock-offset, node: cp2, ahead: 1h, behind: 1h, at: 0s}", "faults[0].behind: give ahead or behind, not both"},
		{"clock-offset", "{kind: clock-offset, node: cp2, behind: 900000h, at: 0s}", "faults[0].behind: must be between 1s and 876000h0m0s, got 900000h0m0s"},
		{"clock-offset", "{kind: clock-offset, node: cp2, ahead: -1h, at: 0s}", `faults[0].ahead: negative duration "-1h"`},
		{"discovery-unreachable", "{kind: discovery-unreachable, at: 0s}", "faults[0].node: required: a node name or random"},
		{"discovery-unreachable", "{kind: discovery-unreachable, node: cp2, hide: [cp1], at: 0s}", `faults[0].hide: "hide" does not apply to kind discovery-unreachable`},
		{"discovery-partial", "{kind: discovery-partial, node: cp2, at: 0s}", "faults[0].hide: required: the nodes the registry leaves out, e.g. [cp1]"},
		{"discovery-partial", "{kind: discovery-partial, node: cp2, hide: [cp1, cp9], at: 0s}", `faults[0].hide[1]: unknown node "cp9"`},
		{"discovery-partial", "{kind: discovery-partial, node: cp2, hide: [cp2], at: 0s}",
			"faults[0].hide[0]: cp2 is the node itself, which always sees itself (its local affiliate)"},
		{"slow-disk", "{kind: slow-disk, node: cp2, at: 0s}", "faults[0].latency: required: a duration up to 1m0s"},
		{"slow-disk", "{kind: slow-disk, node: cp2, latency: 2m, at: 0s}", "faults[0].latency: must be between 1ms and 1m0s, got 2m0s"},
		{"slow-disk", "{kind: slow-disk, node: w1, latency: 2s, at: 0s}", `faults[0].node: "w1" is a worker, which runs no etcd: slow-disk slows its etcd data`},
		{"address-late", "{kind: address-late, node: cp2, address: 10.0.0.2, at: 0s}", "faults[0].address: address-late needs cluster.network: without it a node has only its main address"},
		{"address-late", "{kind: address-late, node: cp2, address: cp2, at: 0s}", "faults[0].address: required: one of the node's further addresses under cluster.network, an IP address"},
		{"address-late", "{kind: address-late, node: cp2, address: 10.0.0.2, certificates: never, at: 0s}", `faults[0].certificates: unknown certificates "never": one of reissued, at-boot`},
		{"address-late", "{kind: address-late, node: random, address: 10.0.0.2, at: 0s}", "faults[0].node: address-late names its node: the address is that node's"},
		{"address-late", "{kind: address-late, node: w1, address: 10.0.0.2, at: 0s}", `faults[0].node: "w1" is a worker, which runs no etcd: address-late acts on its etcd certificates`},
		{"address-gone", "{kind: address-gone, node: cp2, address: 10.0.0.2, at: 1m}", "faults[0].address: address-gone needs cluster.network: without it a node has only its main address"},
		{"address-gone", "{kind: address-gone, node: cp2, at: 1m}", "faults[0].address: required: one of the node's further addresses under cluster.network, an IP address"},
	}

	covered := map[string]bool{}

	for _, tc := range cases {
		covered[tc.kind] = true

		t.Run(tc.kind+" "+tc.want, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(head+"  - "+tc.fault+"\n"))

			var e *scenario.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want an *Error", err, err)
			}

			if !strings.Contains(err.Error(), "s.yaml:6: "+tc.want) {
				t.Fatalf("error:\n%v\nwant:\ns.yaml:6: %s", err, tc.want)
			}
		})
	}

	for _, k := range Kinds {
		if !covered[k.Kind()] {
			t.Errorf("kind %s has no validation case", k.Kind())
		}
	}
}

// A replay takes the nodes and seeds its run resolved, whatever the seed would
// draw now.
func TestPlanReplaysTheRecordedSchedule(t *testing.T) {
	sc := parse(t, "  - {name: cut, kind: isolate, node: random, at: 0s}\n  - {name: slow, kind: latency, node: cp2, port: etcd-peer, latency: 10ms, jitter: 5ms, at: 0s}\n")
	tgt := fakeTarget{caps: sim.Target{}.Capabilities(), disposable: true}

	drawn, err := Plan(sc, tgt, PlanOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}

	other := map[string]string{"cp2": "cp3", "cp3": "cp2"}[drawn[0].Node()]
	rec := []result.Planned{{Name: "cut", Kind: "isolate", Nodes: []string{other}, Seed: 11}, {Name: "slow", Kind: "latency", Nodes: []string{"cp2"}, Seed: 12}}

	replayed, err := Plan(sc, tgt, PlanOptions{Seed: 3, Recorded: rec})
	if err != nil {
		t.Fatal(err)
	}

	if replayed[0].Node() != other || replayed[0].Seed != 11 || replayed[1].Seed != 12 {
		t.Errorf("replayed plan %s/%d, %d; want the recorded %s/11, 12", replayed[0].Node(), replayed[0].Seed, replayed[1].Seed, other)
	}
}

// viewOf is a view of one observation with the nodes' promotion refusals.
func viewOf(obs *history.Observation, refusals map[string]int) View {
	return View{Obs: obs, PromoteRefusals: func(node string) int { return refusals[node] }}
}

// The discovery kinds are refused with Kubernetes: a control plane there
// also finds the others through the kubernetes endpoints, which the sim
// does not model.
func TestDiscoveryKindsRefuseKubernetes(t *testing.T) {
	const head = "apiVersion: talchaos/v1\nkind: Scenario\nname: s\ncluster: {controlPlanes: 3, kubernetes: true}\nfaults:\n"

	for _, f := range []string{
		"{kind: discovery-unreachable, node: cp2, at: 0s}",
		"{kind: discovery-partial, node: cp2, hide: [cp1], at: 0s}",
	} {
		_, err := Parse("s.yaml", []byte(head+"  - "+f+"\n"))
		if err == nil || !strings.Contains(err.Error(), "s.yaml:6: faults[0].kind: ") ||
			!strings.Contains(err.Error(), "is not modelled with cluster.kubernetes: a control plane also finds the others through the kubernetes endpoints") {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// address-late and address-gone name one of the node's further routed
// addresses under cluster.network; address-gone may name a worker's.
func TestAddressLateValidation(t *testing.T) {
	const head = "apiVersion: talchaos/v1\nkind: Scenario\nname: s\ncluster:\n  controlPlanes: 3\n  workers: 1\n" +
		"  network: {addresses: [10.197.230.11/24, 172.16.0.11/24]}\n" +
		"  nodes: {cp2: {addresses: [{address: 10.255.0.2, unrouted: true}]}}\nfaults:\n"

	for _, tc := range []struct{ fault, want string }{
		{"{kind: address-late, node: cp2, address: 172.16.0.12, at: 0s, for: 1m}", ""},
		{"{kind: address-late, node: cp2, address: 172.16.0.12, certificates: at-boot, at: 0s}", ""},
		{"{kind: address-late, node: cp2, address: 10.197.230.12, at: 0s}", "faults[0].address: 10.197.230.12 is cp2's main address, which the run reaches it at: one of [172.16.0.12]"},
		{"{kind: address-late, node: cp2, address: 172.16.0.11, at: 0s}", "faults[0].address: 172.16.0.11 is not an address of cp2 under cluster.network: one of [172.16.0.12]"},
		{"{kind: address-late, node: cp2, address: 10.255.0.2, at: 0s}", "faults[0].address: 10.255.0.2 is unrouted: the other nodes never reach it"},
		{"{kind: address-gone, node: cp2, address: 172.16.0.12, at: 1m}", ""},
		{"{kind: address-gone, node: w1, address: 172.16.0.14, at: 1m, for: 1m}", ""},
		{"{kind: address-gone, node: cp2, address: 10.197.230.12, at: 1m}", "faults[0].address: 10.197.230.12 is cp2's main address, which the run reaches it at: one of [172.16.0.12]"},
		{"{kind: address-gone, node: random, address: 172.16.0.12, at: 1m}", `faults[0].node: unknown node "random"`},
		{"{kind: address-gone, node: cp3, address: 10.255.0.2, at: 1m}", "faults[0].address: 10.255.0.2 is not an address of cp3 under cluster.network: one of [172.16.0.13]"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(head+"  - "+tc.fault+"\n"))

			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "s.yaml:10: "+tc.want)):
				t.Fatalf("error:\n%v\nwant:\ns.yaml:10: %s", err, tc.want)
			}
		})
	}
}
