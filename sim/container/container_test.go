package container_test

import (
	"bytes"
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/container"
	"github.com/talchaos/talchaos/sim/kubecp"
	"github.com/talchaos/talchaos/sim/simtest"
)

// nodeBinary is the talchaos binary the tests' node images carry: built as
// `go build` builds it on a machine with a C compiler, so dynamically linked
// where one is (the image carries it with its loader and libraries, as a
// user's `go install`ed binary; TestInstalledBinary runs that one as a user
// does), static where none is. Not CGO_ENABLED=0 as make build: that would
// compile every package a second time for this test alone (about two
// minutes of a core, measured in docs/measurements.md "Stop 55"), where
// default flags share what go vet and the other tests compiled. The static
// binary alone in its image is TestRuntimeDeps's case "static".
var nodeBinary string

// allBuiltins runs every built-in the container target can run in
// TestBuiltinsAsOnSim (make test-long); make test runs quickBuiltins: at the
// container target's 20x, the long built-ins take minutes each, and make
// test must stay within 15 minutes on 2 cores.
var allBuiltins = flag.Bool("all-builtins", false, "run every runnable built-in on containers, not only the quick ones")

// quickBuiltins are a PKI mismatch: a failure without faults, judged as on
// the sim. The formation is TestRealFaults's (with the network, process and
// power faults), TestOperatorsAddressesOnContainers's and
// TestKubernetesHappyPath's; the happy-path built-in went to make test-long
// with the power and membership ones (promote-stall, crash-loop-resilient)
// to keep make test within 15 minutes on 2 cores.
var quickBuiltins = map[string]bool{"pki-mismatch": true}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "talchaos-container-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)

		return 1
	}
	defer os.RemoveAll(dir) //nolint:errcheck

	nodeBinary = filepath.Join(dir, "talchaos")

	build := exec.Command("go", "build", "-o", nodeBinary, "github.com/talchaos/talchaos/cmd/talchaos")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr

	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the node binary:", err)

		return 1
	}

	return m.Run()
}

// docker is a client of the engine, or the test is skipped where none runs
// (CI has one).
func docker(t *testing.T) *testcontainers.DockerClient {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	d, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = d.Ping(ctx, client.PingOptions{})
	}

	if err != nil {
		t.Skipf("no Docker engine: %v", err)
	}

	t.Cleanup(func() { d.Close() }) //nolint:errcheck

	return d
}

// leftovers lists every container, network and image carrying talchaos's run label.
func leftovers(t *testing.T, d *testcontainers.DockerClient) []string {
	t.Helper()

	ctx := context.Background()
	f := client.Filters{}.Add("label", container.LabelRun)

	var out []string

	ctrs, err := d.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range ctrs.Items {
		out = append(out, "container "+strings.Join(c.Names, ","))
	}

	nets, err := d.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}

	for _, n := range nets.Items {
		out = append(out, "network "+n.Name)
	}

	imgs, err := d.ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}

	for _, i := range imgs.Items {
		out = append(out, "image "+strings.Join(i.RepoTags, ","))
	}

	return out
}

func parse(t *testing.T, name string, data []byte) *scenario.Scenario {
	t.Helper()

	sc, err := chaos.Parse(name, data)
	if err != nil {
		t.Fatal(err)
	}

	return sc
}

// builtin is a built-in scenario, parsed.
func builtin(t *testing.T, name string) *scenario.Scenario {
	t.Helper()

	sc, err := scenarios.Load(name)
	if err != nil {
		t.Fatal(err)
	}

	return sc
}

// runOn runs the scenario on the container target and checks that it left
// nothing behind; a run voided by a stall of this machine is made again
// (simtest.UnlessVoid).
func runOn(t *testing.T, d *testcontainers.DockerClient, sc *scenario.Scenario) *result.Result {
	t.Helper()

	res := simtest.UnlessVoid(func() *result.Result { return runOnce(t, d, sc) }, func(attempt int, res *result.Result) {
		t.Logf("%s on containers, run %d of %d: %s", sc.Name, attempt, simtest.VoidRuns, res.Error)
	})

	// The whole report, for a failure that the events do not explain: kept
	// with go test -artifacts (-outputdir says where).
	dir := t.ArtifactDir()
	if _, err := reports.Write(dir, res); err != nil {
		t.Errorf("%s: report: %v", sc.Name, err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's report: %s (kept with go test -artifacts)", sc.Name, dir)
		}
	})

	return res
}

func runOnce(t *testing.T, d *testcontainers.DockerClient, sc *scenario.Scenario) *result.Result {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	res, err := harness.Run(ctx, sc, harness.Options{Target: container.Target{Binary: nodeBinary}, Seed: 1})
	if err != nil {
		t.Fatalf("%s on containers: %v", sc.Name, err)
	}

	if left := leftovers(t, d); len(left) > 0 {
		t.Errorf("%s left behind: %v", sc.Name, left)
	}

	return res
}

// diagnosisCodes are the codes of the run's diagnoses, by node.
func diagnosisCodes(res *result.Result) []string {
	var out []string
	for _, dg := range res.Diagnoses {
		out = append(out, dg.Code+"@"+dg.Node)
	}

	slices.Sort(out)

	return out
}

// racyDiagnoses are the built-ins whose diagnoses a race between real etcd
// members decides, not the seed: bootstrap-twice's split brain is diagnosed on
// whichever cluster the third control plane joins first (3 of 20 sim replays
// agree with the first; docs/measurements.md).
var racyDiagnoses = map[string]bool{"bootstrap-twice": true}

// Every built-in scenario whose faults the container target can inject
// passes there with the verdict and the diagnoses it gives on the sim (run
// here too, one after the other: this package runs beside the scenario
// suite on 2 cores); the others are refused before anything starts.
func TestBuiltinsAsOnSim(t *testing.T) {
	d := docker(t)

	var runnable []string

	for _, name := range scenarios.Names() {
		sc := builtin(t, name)

		// The container target takes the Kubernetes built-ins when the
		// binaries are built; TestKubernetesHappyPath runs the one it can
		// carry out (the FR-000 pair slows etcd's peer link with toxics).
		if sc.Cluster.Kubernetes {
			_, kerr := kubecp.Locate("")
			if err := (container.Target{}).Check(sc); kerr == nil && err != nil {
				t.Errorf("%s: the container target refuses cluster.kubernetes: %v", name, err)
			} else if kerr != nil && err == nil {
				t.Errorf("%s: the container target accepts cluster.kubernetes without its binaries", name)
			}

			continue
		}

		// Its sim run needs a network namespace this package's tests,
		// which reach Docker's bridges, cannot be in: run on its own below.
		if sc.Cluster.Network != nil {
			continue
		}

		if _, err := chaos.Plan(sc, container.Target{}, chaos.PlanOptions{Seed: 1}); err != nil {
			if !strings.Contains(err.Error(), "cannot carry out") {
				t.Errorf("%s: refused for another reason than a fault: %v", name, err)
			}

			continue
		}

		runnable = append(runnable, name)
	}

	if !slices.Contains(runnable, "happy-path") || len(runnable) < 5 {
		t.Fatalf("the container target runs only %v of the built-ins", runnable)
	}

	for name := range quickBuiltins {
		if !slices.Contains(runnable, name) {
			t.Errorf("quick built-in %s does not run on containers", name)
		}
	}

	for _, name := range runnable {
		t.Run(name, func(t *testing.T) {
			if !*allBuiltins && !quickBuiltins[name] {
				t.Skip("a long built-in: make test-long runs it (-all-builtins)")
			}

			onSim, err := harness.Run(context.Background(), builtin(t, name), harness.Options{Target: sim.Target{}, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}

			res := runOn(t, d, builtin(t, name))

			if res.Verdict != result.Pass {
				t.Errorf("%s on containers: %s, diagnoses %v\n%s", name, res.Verdict, diagnosisCodes(res), reports.Summary(res))
			}

			if res.Verdict != onSim.Verdict || (!racyDiagnoses[name] && !slices.Equal(diagnosisCodes(res), diagnosisCodes(onSim))) {
				t.Errorf("on containers: %s %v; on the sim: %s %v", res.Verdict, diagnosisCodes(res), onSim.Verdict, diagnosisCodes(onSim))
			}

			diagnosed := map[string]bool{}
			for _, dg := range res.Diagnoses {
				diagnosed[dg.Code] = true
			}

			sc := builtin(t, name)
			for _, want := range sc.Expect.Diagnoses {
				if !diagnosed[want.Code] {
					t.Errorf("%s on containers lacks the diagnosis %s the sim gives", name, want.Code)
				}
			}

			for _, not := range sc.Expect.NoDiagnoses {
				if diagnosed[not] {
					t.Errorf("%s on containers diagnoses %s, the sim does not", name, not)
				}
			}
		})
	}
}

// One cluster, every real fault in turn: cp1's container (the leader) is
// SIGKILLed while cp2 joins as a learner, and comes back as the same etcd
// member (it replays its WAL from the container's disk); once all are voters,
// cp1 is frozen (docker pause) past the election timeout and the others elect
// a new leader; then the kernel drops cp3's packets to and from cp1 and cp2,
// and its etcd loses the leader; then cp3 is disconnected from the network and
// nothing reaches it. The cluster is whole again after each.
//
// The faults assume cp2 joins before cp3 (cp3's voter state starts the later
// ones): cp3 pulls its etcd image for five Talos minutes, so it asks to join
// well after cp2 took the learner slot. Without it, cp3 once joined first
// under load: cp1 was paused with only two voters (no quorum, no new leader)
// and killed when cp2 became a learner, just before the cut that needed it.
const realFaults = `apiVersion: talchaos/v1
kind: Scenario
name: real-faults
talos: v1.12
timeScale: 30
cluster:
  controlPlanes: 3
  nodes:
    cp3:
      etcdImagePull: 5m
orchestrator:
  name: resilient
faults:
  # cp2 as a member (its learner phase can be shorter than a poll)
  - {name: kill-leader, kind: reboot, node: cp1, when: {node: cp2, state: member}}
  - {name: pause-leader, kind: pause-node, node: cp1, when: {node: cp3, state: voter, after: 30s}, for: 2m}
  - {name: cut-1-3, kind: partition, nodes: [cp1, cp3], when: {node: cp3, state: voter, after: 3m}, for: 3m}
  - {name: cut-2-3, kind: partition, nodes: [cp2, cp3], when: {node: cp3, state: voter, after: 3m}, for: 3m}
  - {name: isolate-3, kind: isolate, node: cp3, when: {node: cp3, state: voter, after: 7m}, for: 3m}
expect:
  # the last fault heals ten Talos minutes after cp3 became a voter, which
  # took 19 under CI's load (30m once ended the run with cp3 still cut off)
  within: 45m
  # the faults after the formation need the run to go on watching
  settle: 15m
  converged: true
  voters: 3
  learners: 0
`

func TestRealFaults(t *testing.T) {
	d := docker(t)

	res := runOn(t, d, parse(t, "real-faults.yaml", []byte(realFaults)))
	if res.Verdict != result.Pass {
		// What the nodes did from the last fault on says why (the run's
		// report is gone with the test's temp dir); the checks below still
		// say which fault went wrong.
		t.Errorf("did not converge:\n%s\nevents from the last fault on:\n%s", reports.Summary(res), eventsFromLastFault(res))
	}

	var (
		active                      = map[string]bool{}
		started                     = map[string]bool{}
		cp1Down, leaderless, cp3Off bool
		cp1IDs                      = map[uint64]bool{}
		cp1Boot                     string // cp1's boot ID when kill-leader started
		lastLeader, leaderAtPause   uint64
		leaderChanged, lostLeader   bool
		voterOrder                  []string // nodes in the order their members first reported being voters
	)

	for _, e := range res.History.Entries {
		if f := e.Fault; f != nil {
			if f.Error != "" {
				t.Errorf("fault %s (%s): %s", f.Name, f.Phase, f.Error)
			}

			active[f.Name] = f.Phase == history.FaultStarted
			started[f.Name] = started[f.Name] || active[f.Name]

			if f.Name == "pause-leader" && active[f.Name] {
				leaderAtPause = lastLeader
			}
		}

		o := e.Observed
		if o == nil {
			continue
		}

		if o.Status != nil && o.Status.MemberID != 0 && !o.Status.IsLearner && !slices.Contains(voterOrder, o.Name) {
			voterOrder = append(voterOrder, o.Name)
		}

		if o.Status != nil && o.Status.Leader != 0 {
			lastLeader = o.Status.Leader
			leaderChanged = leaderChanged || (active["pause-leader"] && o.Status.Leader != leaderAtPause)
		}

		// The history records a node's state when it changes: a leader
		// kept through the pause shows as no other one seen.
		if o.Status != nil && active["pause-leader"] && o.Name != "cp1" && o.Status.Leader != leaderAtPause {
			lostLeader = true
		}

		switch o.Name {
		case "cp1":
			// Down, or back with another boot ID: a container killed and
			// started again between two looks is never seen down.
			if !started["kill-leader"] && o.BootID != "" {
				cp1Boot = o.BootID
			}

			cp1Down = cp1Down || (started["kill-leader"] && (o.Mode == history.ModeDown || (cp1Boot != "" && o.BootID != "" && o.BootID != cp1Boot)))

			if o.Status != nil && o.Status.MemberID != 0 {
				cp1IDs[o.Status.MemberID] = true
			}
		case "cp3":
			leaderless = leaderless || (active["cut-1-3"] && active["cut-2-3"] && o.Status != nil && o.Status.Leader == 0)
			cp3Off = cp3Off || (active["isolate-3"] && o.Mode == history.ModeDown)
		}
	}

	if len(voterOrder) < 3 || voterOrder[1] != "cp2" {
		t.Errorf("control planes became voters in the order %v; the faults assume cp1, cp2, cp3", voterOrder)
	}

	for _, f := range []string{"kill-leader", "pause-leader", "cut-1-3", "cut-2-3", "isolate-3"} {
		if !started[f] {
			t.Errorf("fault %s never started", f)
		}
	}

	if !cp1Down {
		t.Error("cp1 was not seen down, nor back with another boot ID, after its container was killed")
	}

	if len(cp1IDs) != 1 {
		t.Errorf("cp1 came back as %d etcd members, want its one member replayed from disk", len(cp1IDs))
	}

	// cp1 leads from its reboot (the one voter then) unless an election
	// moved the leadership before the pause (a loaded machine's late
	// heartbeats): then pausing a follower elects no one, and the cluster
	// must keep its leader through the pause instead.
	switch {
	case leaderAtPause == 0:
		t.Error("no leader was seen before cp1 was paused")
	case cp1IDs[leaderAtPause] && !leaderChanged:
		t.Error("no new leader was elected while cp1, the leader, was paused")
	case !cp1IDs[leaderAtPause] && lostLeader:
		t.Errorf("cp1 was a follower when paused (leader %x), and the others lost that leader during the pause", leaderAtPause)
	}

	if !leaderless {
		t.Error("cp3's etcd never lost its leader while the kernel dropped its packets to cp1 and cp2")
	}

	if !cp3Off {
		t.Error("cp3 was never seen down while disconnected from the network")
	}
}

// eventsFromLastFault are the run's events from the start of its last fault,
// one a line.
func eventsFromLastFault(res *result.Result) string {
	var from int64
	for _, f := range res.Faults {
		from = max(from, f.StartMs)
	}

	return eventsFrom(res, from)
}

// eventsFrom are the run's events from fromMs on, one a line.
func eventsFrom(res *result.Result, from int64) string {
	var b strings.Builder

	for _, e := range res.Events {
		if e.TMs >= from {
			fmt.Fprintf(&b, "  %7.3fs  %-4s %-22s %s\n", float64(e.TMs)/1000, e.Node, e.Kind, e.Msg)
		}
	}

	return b.String()
}

// A run killed with SIGKILL leaves its containers, network and image; the
// next run removes them.
func TestKilledRunIsReaped(t *testing.T) {
	d := docker(t)

	cmd := exec.Command(nodeBinary, "run", "happy-path", "--target", "container", "--report-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "TALCHAOS_NODE_BINARY="+nodeBinary)

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(2 * time.Minute)
	for len(leftovers(t, d)) < 3 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}

	// Its watchdog first: this is the next run's Reap, for when the
	// watchdog died with the run.
	killWatchdogOf(t, cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck
	cmd.Wait()                          //nolint:errcheck

	if len(leftovers(t, d)) == 0 {
		t.Fatal("the killed run had created nothing to reap")
	}

	removed, err := container.Reap(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}

	if removed == 0 {
		t.Error("Reap removed nothing")
	}

	// The engine may still finish a create the killed run had asked for; the
	// next run's Reap takes what appears after this one, as a second call
	// does here.
	deadline = time.Now().Add(15 * time.Second)
	for len(leftovers(t, d)) > 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)

		if _, err := container.Reap(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}

	if left := leftovers(t, d); len(left) > 0 {
		t.Errorf("after Reap: %v", left)
	}
}

// killWatchdogOf SIGKILLs the watchdog of the talchaos process pid (the
// process whose environment names pid in scratch.WatchdogEnv).
func killWatchdogOf(t *testing.T, pid int) {
	t.Helper()

	want := []byte(fmt.Sprintf("%s=%d:", scratch.WatchdogEnv, pid))

	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		entries, _ := os.ReadDir("/proc") //nolint:errcheck

		for _, e := range entries {
			environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !bytes.Contains(environ, want) {
				continue
			}

			if w, err := strconv.Atoi(e.Name()); err == nil {
				syscall.Kill(w, syscall.SIGKILL) //nolint:errcheck

				return
			}
		}
	}

	t.Fatalf("no watchdog of process %d", pid)
}

// A talchaos from a plain `go install` on a machine with a C compiler is
// dynamically linked (cgo); run as a user runs it, with no
// TALCHAOS_NODE_BINARY, its node image carries it with its loader and
// libraries, and the happy path passes on containers.
func TestInstalledBinary(t *testing.T) {
	d := docker(t)

	out, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatal(err)
	}

	if _, err := exec.LookPath(strings.TrimSpace(string(out))); err != nil {
		t.Skipf("no C compiler (%v): go install makes a static binary here, as the other tests' node binary is", err)
	}

	gobin := t.TempDir()
	install := exec.Command("go", "install", "github.com/talchaos/talchaos/cmd/talchaos")
	install.Env = append(os.Environ(), "GOBIN="+gobin, "CGO_ENABLED=1")

	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}

	bin := filepath.Join(gobin, "talchaos")

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}

	dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	f.Close() //nolint:errcheck

	if !dynamic {
		t.Fatal("go install with cgo made a binary without an ELF interpreter")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, bin, "run", "happy-path", "--target", "container", "--report-dir", t.TempDir())
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TALCHAOS_NODE_BINARY=") })

	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verdict: PASS") {
		t.Errorf("happy-path on containers with the installed binary: %v\n%s", err, out)
	}

	if left := leftovers(t, d); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// FR-000's cluster as written (happy-path-ipv6) on containers: a Docker
// network on its IPv6 and IPv4 subnets, each node at its addresses there and
// its announced loopback routed by the others; the three voters carry the
// hostnames and advertise their node and loopback addresses in brackets.
func TestOperatorsAddressesOnContainers(t *testing.T) {
	d := docker(t)

	sc := builtin(t, "happy-path-ipv6")

	// Without IPv6 in Docker there is nothing to run on.
	probe, err := tcnetwork.New(context.Background(), tcnetwork.WithEnableIPv6(), tcnetwork.WithLabels(map[string]string{container.LabelRun: "ipv6-probe"}),
		tcnetwork.WithIPAM(&network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: netip.MustParsePrefix("fd00:213:213::/64")}}}))
	if err != nil {
		t.Skipf("Docker makes no IPv6 network here: %v", err)
	}

	probe.Remove(context.Background()) //nolint:errcheck

	res := runOn(t, d, sc)
	if res.Verdict != result.Pass {
		t.Fatalf("happy-path-ipv6 on containers: %s\n%s", res.Verdict, reports.Summary(res))
	}

	want := []string{
		"solcp01 [https://[fd00:101::11]:2380 https://[fd00:101:fe::11]:2380]",
		"solcp02 [https://[fd00:101::12]:2380 https://[fd00:101:fe::12]:2380]",
		"solcp03 [https://[fd00:101::13]:2380 https://[fd00:101:fe::13]:2380]",
	}

	var got []string

	// Each member's URLs sorted: the AdvertisedPeerController puts them in
	// the spec's order once the member's etcd is healthy, which the run's
	// end may come before.
	for _, m := range res.History.Final().Main().Members {
		got = append(got, fmt.Sprintf("%s %v", m.Hostname, slices.Sorted(slices.Values(m.PeerURLs))))
	}

	slices.Sort(got)

	if !slices.Equal(got, want) {
		t.Errorf("members %q, want %q", got, want)
	}
}

// A shared IP on containers (vip-moves-three-control-planes): the holder's
// node process puts the VIP on its container's eth0 and announces it, and
// when cp1, which took it first, is killed, another control plane whose
// etcd keeps quorum takes it once cp1's election lease lapses.
func TestSharedIPMovesOnContainers(t *testing.T) {
	d := docker(t)

	// The built-in settles for 10 Talos minutes, 10 s at the sim's 60x but
	// 30 s at the containers' 20x: 4 minutes (12 s) cover the power cut
	// 30 s (1.5 s) after the cluster formed and the move, the holder's lease
	// (its 3 s floor) renewed once by a new etcd leader.
	sc := builtin(t, "vip-moves-three-control-planes")
	sc.Expect.Settle.Duration = 4 * time.Minute

	res := runOn(t, d, sc)
	if res.Verdict != result.Pass {
		t.Fatalf("vip-moves-three-control-planes on containers: %s\n%s", res.Verdict, reports.Summary(res))
	}

	var holders []string

	for _, e := range res.History.Entries {
		if o := e.Observed; o != nil && o.HoldsSharedIP && (len(holders) == 0 || holders[len(holders)-1] != o.Name) {
			holders = append(holders, o.Name)
		}
	}

	if len(holders) < 2 || holders[0] != "cp1" || slices.Contains(holders[1:], "cp1") {
		t.Errorf("the shared IP's holders in turn: %v, want cp1 then another", holders)
	}
}

// happy-path-kubernetes on containers, through the engine: each control
// plane's container runs its kube-apiserver, controller manager and
// scheduler, every container its KWOK kubelet, and the engine reads the
// endpoints and Nodes through the cluster endpoint the host serves. All
// three control planes are in the endpoints and every node is Ready.
func TestKubernetesHappyPath(t *testing.T) {
	if _, err := kubecp.Locate(""); err != nil {
		t.Skipf("the Kubernetes binaries are not built (%v)", err)
	}

	d := docker(t)

	sc := builtin(t, "happy-path-kubernetes")
	res := runOn(t, d, sc)

	if res.Verdict != result.Pass {
		// A happy path has no fault to start from: every event says why.
		t.Errorf("happy-path-kubernetes on containers: %s, diagnoses %v\n%s\nevents:\n%s", res.Verdict, diagnosisCodes(res), reports.Summary(res), eventsFrom(res, 0))
	}

	if o := res.Outcome; o.KubernetesEndpoints == nil || *o.KubernetesEndpoints != 3 {
		t.Errorf("kubernetes endpoints %v, want 3", o.KubernetesEndpoints)
	}

	if o := res.Outcome; o.NodesReady == nil || *o.NodesReady != sc.Cluster.ControlPlanes+sc.Cluster.Workers {
		t.Errorf("Nodes Ready %v, want %d", o.NodesReady, sc.Cluster.ControlPlanes+sc.Cluster.Workers)
	}
}

// kubeFaults powers cp3's container off once its API server is in the
// endpoints, for long enough that its endpoint lease runs out (15 s real
// time, 5 Talos minutes at 20x), then back on.
const kubeFaults = `apiVersion: talchaos/v1
kind: Scenario
name: kubernetes-power-off
talos: v1.12
timeScale: 20
cluster:
  controlPlanes: 3
  kubernetes: true
orchestrator:
  name: resilient
faults:
  - {name: cp3-off, kind: power-off, node: cp3, when: {node: cp3, state: voter, after: 5m}, for: 15m}
expect:
  within: 60m
  # the fault and cp3's return come after the formation
  settle: 30m
  converged: true
  voters: 3
  learners: 0
  kubernetesEndpoints: 3
`

// A control plane's API server runs inside its container: powering the
// container off takes cp3 out of the kubernetes endpoints (the other API
// servers see its lease expire), and it is back in them once the container
// is on again. Make test-long runs it (-all-builtins): about two and a
// half minutes.
func TestKubernetesFaults(t *testing.T) {
	if !*allBuiltins {
		t.Skip("a long test: make test-long runs it (-all-builtins)")
	}

	if _, err := kubecp.Locate(""); err != nil {
		t.Skipf("the Kubernetes binaries are not built (%v)", err)
	}

	d := docker(t)
	res := runOn(t, d, parse(t, "kubernetes-power-off.yaml", []byte(kubeFaults)))

	if res.Verdict != result.Pass {
		t.Errorf("on containers: %s, diagnoses %v\n%s", res.Verdict, diagnosisCodes(res), reports.Summary(res))
	}

	addr := map[string]string{}
	for _, n := range res.History.Nodes {
		addr[n.Name] = n.Address
	}

	all := []string{addr["cp1"], addr["cp2"], addr["cp3"]}
	slices.Sort(all)

	// The endpoints as the API servers listed them, in order: all three,
	// then without cp3 while it was off, then all three again.
	var seen [][]string

	for _, e := range res.History.Entries {
		if o := e.Observed; o != nil && o.APIServer != nil && o.APIServer.Ready && o.APIServer.Endpoints != nil {
			eps := slices.Sorted(slices.Values(o.APIServer.Endpoints))
			if len(seen) == 0 || !slices.Equal(seen[len(seen)-1], eps) {
				seen = append(seen, eps)
			}
		}
	}

	full, without, back := false, false, false

	for _, eps := range seen {
		switch {
		case slices.Equal(eps, all) && without:
			back = true
		case slices.Equal(eps, all):
			full = true
		case full && !slices.Contains(eps, addr["cp3"]) && len(eps) == 2:
			without = true
		}
	}

	t.Logf("the endpoints went %v", seen)

	if !full || !without || !back {
		t.Errorf("the endpoints went %v; want all three control planes, then cp1 and cp2 while cp3 was off, then all three", seen)
	}
}

// Check takes cluster.kubernetes when the binaries are built and refuses it,
// naming the build command, when they are not.
func TestCheckKubernetes(t *testing.T) {
	const kube = `apiVersion: talchaos/v1
kind: Scenario
name: kube
talos: v1.12
cluster:
  controlPlanes: 3
  kubernetes: true
`

	err := (container.Target{}).Check(parse(t, "kube.yaml", []byte(kube)))

	if _, lerr := kubecp.Locate(""); lerr != nil {
		if err == nil || !strings.Contains(err.Error(), kubecp.BuildCommand) {
			t.Errorf("without the binaries: %v, want a refusal naming %q", err, kubecp.BuildCommand)
		}
	} else if err != nil {
		t.Errorf("with the binaries: %v", err)
	}

	t.Setenv(kubecp.EnvDir, t.TempDir()) // no binaries there

	if err := (container.Target{}).Check(parse(t, "kube.yaml", []byte(kube))); err == nil || !strings.Contains(err.Error(), kubecp.BuildCommand) {
		t.Errorf("with %s empty: %v, want a refusal naming %q", kubecp.EnvDir, err, kubecp.BuildCommand)
	}
}
