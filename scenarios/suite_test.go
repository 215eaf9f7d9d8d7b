package scenarios_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive // Ginkgo's DSL
	. "github.com/onsi/gomega"    //nolint:revive // Gomega's matchers
	"go.uber.org/goleak"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/history"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/result/secretscan"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/syncbuf"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/netns"
	"github.com/talchaos/talchaos/sim/simtest"
)

// The suite runs in a network namespace of its own (package netns), where
// the built-ins with cluster.network take their addresses.
func TestMain(m *testing.M) { os.Exit(netns.Main(m.Run)) }

func TestScenarios(t *testing.T) {
	// No run may leave a goroutine behind (etcd members, proxies, API servers, observers).
	defer checkLeaks(t)

	RegisterFailHandler(Fail)

	// The rejudge at seeds 2 and 3 (label "seeds") would triple the suite's
	// time, and the five- and seven-member formations (label "long") starve
	// beside the other packages' tests on 2 cores: `make test-long` runs them
	// (-ginkgo.label-filter='seeds || long').
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if suiteConfig.LabelFilter == "" {
		suiteConfig.LabelFilter = "!seeds && !long"
	}

	RunSpecs(t, "built-in scenarios", suiteConfig, reporterConfig)
}

// leakOptions are the goroutines a run may leave behind.
var leakOptions = []goleak.Option{
	// Ginkgo's own signal watcher lives as long as the process, and in
	// parallel processes (make test) its watch of the CLI's abort.
	goleak.IgnoreTopFunction("github.com/onsi/ginkgo/v2/internal/interrupt_handler.(*InterruptHandler).registerForInterrupts.func2"),
	goleak.IgnoreTopFunction("github.com/onsi/ginkgo/v2/internal/interrupt_handler.(*InterruptHandler).registerForInterrupts.func1"),
	// toxiproxy v2.12 leaks a link's toxic chain when writing to a closed
	// destination fails while a toxic still holds data (link.go stops
	// reading its output); nothing outside toxiproxy can unblock them.
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*BandwidthToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
	// Our latency and gate toxics sit in the same chain and block the same way.
	goleak.IgnoreTopFunction("github.com/talchaos/talchaos/harness/netfault.(*LatencyToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/talchaos/talchaos/harness/netfault.(*GateToxic).Pipe"),
	goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
	// A slow-disk fault's seccomp filter stays for the life of the
	// process, and so does the goroutine that answers it (sim/diskgate).
	goleak.IgnoreAnyFunction("github.com/talchaos/talchaos/sim/diskgate.serve"),
}

// checkLeaks fails the suite on a goroutine a run left behind. Ginkgo's CLI
// does not show a parallel process's own output when the process fails
// after its specs passed (the suite only says "Test Suite Failed"), so the
// finding also goes to a file in the folder TALCHAOS_SUITE_LEAKS names,
// which make test-scenarios prints.
func checkLeaks(t *testing.T) {
	err := goleak.Find(leakOptions...)
	if err == nil {
		return
	}

	t.Error(err)

	if dir := os.Getenv("TALCHAOS_SUITE_LEAKS"); dir != "" {
		report := fmt.Sprintf("goroutines left behind in process %d of the scenario suite:\n%v\n", os.Getpid(), err)
		if werr := os.WriteFile(filepath.Join(dir, fmt.Sprintf("leaks-%d.txt", os.Getpid())), []byte(report), 0o600); werr != nil {
			t.Error(werr)
		}
	}
}

// Every built-in scenario runs on the sim target and must meet its own
// expectations: its verdict is pass because real etcd members and the real
// client did what the expect block says.
var _ = Describe("built-in scenario", func() {
	for _, name := range scenarios.Names() {
		It(name, append(heavy(name), func(ctx SpecContext) {
			sc, err := scenarios.Load(name)
			Expect(err).NotTo(HaveOccurred())

			skipWithoutKubernetes(sc)
			skipUnsupported(sc)

			run := runUnlessVoid(ctx, sc, 1)
			Expect(run.err).NotTo(HaveOccurred())
			Expect(run.res.Verdict).To(Equal(result.Pass), explain(run.res))
			Expect(run.res.Checks).NotTo(BeEmpty(), "a scenario without expectations proves nothing")

			Expect(run.leaks()).To(BeEmpty(), "secrets in what talchaos prints or writes")
			Expect(run.rejudged(sc)).To(Succeed())

			if browserChecked[name] {
				Expect(run.inBrowser()).To(Succeed())
			}
		}, SpecTimeout(3*time.Minute))...)
	}
})

// Every built-in scenario at seeds 2 and 3 (seed 1 is above): judged again
// from its report.json alone, the verdict, outcome, checks and diagnoses are
// the run's. Run by `make test-long`.
var _ = Describe("built-in scenario rejudged", Label("seeds"), func() {
	for _, name := range scenarios.Names() {
		for _, seed := range []int64{2, 3} {
			It(fmt.Sprintf("%s seed %d", name, seed), func(ctx SpecContext) {
				sc, err := scenarios.Load(name)
				Expect(err).NotTo(HaveOccurred())

				skipWithoutKubernetes(sc)
				skipUnsupported(sc)

				run := runRecorded(ctx, sc, seed)
				Expect(run.err).NotTo(HaveOccurred())
				Expect(run.rejudged(sc)).To(Succeed())
			}, SpecTimeout(3*time.Minute))
		}
	}
})

// A bootstrap command that prints every machine config and the talosconfig,
// and their keys decoded, to stdout or to stderr: talchaos prints and stores
// its output (progress lines, report events) without one secret of them.
var _ = Describe("an exec command printing the configs", func() {
	for _, stream := range []string{"stdout", "stderr"} {
		It("to "+stream, func(ctx SpecContext) {
			redirect := ""
			if stream == "stderr" {
				redirect = "exec >&2"
			}

			sc, err := chaos.Parse("exec-prints-secrets.yaml", []byte(fmt.Sprintf(execPrintsSecrets, redirect)))
			Expect(err).NotTo(HaveOccurred())

			run := runUnlessVoid(ctx, sc, 1)
			Expect(run.err).NotTo(HaveOccurred())
			Expect(run.res.Verdict).To(Equal(result.Pass), explain(run.res))
			Expect(run.leaks()).To(BeEmpty(), "secrets in what talchaos prints or writes")

			// The command did print the configs and the keys: what is left of
			// them is there, redacted.
			for _, want := range []string{
				"machine:", "contexts:", " +token: \\[redacted\\]", " +secret: \\[redacted\\]",
				" +secretboxEncryptionSecret: \\[redacted\\]", " +key: \\[redacted\\]",
				"-----BEGIN EC PRIVATE KEY-----", "-----BEGIN ED25519 PRIVATE KEY-----", "\\[redacted\\]",
			} {
				re := regexp.MustCompile("(?m)orchestrator.exec +" + stream + ": " + want + "$")
				Expect(re.MatchString(run.progress)).To(BeTrue(), "no line %s in the output", re)
			}
		}, SpecTimeout(time.Minute))
	}
})

// execPrintsSecrets is a scenario whose bootstrap command prints (to stdout,
// or after %s to stderr) every config, the talosconfig, and each of their
// keys decoded, then does nothing else: the nodes stay in maintenance.
const execPrintsSecrets = `apiVersion: talchaos/v1
kind: Scenario
name: exec-prints-secrets
talos: v1.12
timeScale: 60
cluster:
  controlPlanes: 3
orchestrator:
  name: exec
  command:
    - sh
    - -c
    - |
      %s
      cat "$TALCHAOS_CONFIG_CP1" "$TALCHAOS_CONFIG_CP2" "$TALCHAOS_CONFIG_CP3" "$TALOSCONFIG"
      for f in "$TALCHAOS_CONFIG_CP1" "$TALOSCONFIG"; do
        sed -n 's/^ *key: *//p' "$f" | while read -r k; do echo "$k" | base64 -d; done
      done
expect:
  within: 1m
  converged: false
  voters: 0
  nodesInMaintenance: [cp1, cp2, cp3]
`

// recordedRun is one run with everything talchaos would print and write for it.
type recordedRun struct {
	res *result.Result
	err error
	// progress is what `talchaos run --verbose` prints while the run goes on.
	progress string
	// output is everything printed: progress, summary, the error on stderr.
	output string
	// reportDir holds report.json, junit.xml and summary.md.
	reportDir string
	// clusters are the clusters the run provisioned.
	clusters []*sim.Cluster
}

// runUnlessVoid is runRecorded, made again while the judge voids the run
// for a stall of this machine (simtest.UnlessVoid).
func runUnlessVoid(ctx context.Context, sc *scenario.Scenario, seed int64) *recordedRun {
	var run *recordedRun

	simtest.UnlessVoid(func() *result.Result {
		if run = runRecorded(ctx, sc, seed); run.err != nil {
			return nil
		}

		return run.res
	}, noteVoid(sc))

	return run
}

// runSim runs a scenario on the sim target, again while the judge voids the
// run for a stall of this machine (simtest.UnlessVoid).
func runSim(ctx context.Context, sc *scenario.Scenario, seed int64) (*result.Result, error) {
	var err error

	res := simtest.UnlessVoid(func() *result.Result {
		var res *result.Result

		res, err = harness.Run(ctx, sc, harness.Options{Target: sim.Target{}, Seed: seed})

		return res
	}, noteVoid(sc))

	return res, err
}

// noteVoid tells the spec's output of a run voided for a stall.
func noteVoid(sc *scenario.Scenario) func(int, *result.Result) {
	return func(attempt int, res *result.Result) {
		fmt.Fprintf(GinkgoWriter, "%s, run %d of %d: %s\n", sc.Name, attempt, simtest.VoidRuns, res.Error)
	}
}

// runRecorded runs a scenario on the sim target as `talchaos run --verbose`
// does, keeping the clusters it provisions, and writes the reports.
func runRecorded(ctx context.Context, sc *scenario.Scenario, seed int64) *recordedRun {
	rec := &recordingTarget{}

	var progress syncbuf.Buffer

	res, err := harness.Run(ctx, sc, harness.Options{Target: rec, Seed: seed, OnEvent: reports.Progress(&progress, true)})

	run := &recordedRun{res: res, err: err, progress: progress.String(), reportDir: GinkgoT().TempDir(), clusters: rec.recorded()}
	run.output = run.progress + "\n" + reports.Summary(res)

	if err != nil {
		run.output += "\ntalchaos: " + err.Error() + "\n"
	}

	_, werr := reports.Write(run.reportDir, res)
	Expect(werr).NotTo(HaveOccurred())

	return run
}

// browserChecked are the runs whose report.html a real browser loads.
var browserChecked = map[string]bool{"too-many-learners": true, "half-applied-config": true, "quorum-lost": true}

// inBrowser loads the run's report.html in headless Chromium (Debian's
// chromium): it must load with no console message (but those of Chromium's
// own pages), and its DOM must hold a lane per node and a band per fault
// window. Without chromium it says so and checks nothing (.ci/run installs
// it).
func (r *recordedRun) inBrowser() error {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		fmt.Fprintln(GinkgoWriter, "chromium is not installed: report.html not checked in a browser")

		return nil //nolint:nilerr // nothing to check with
	}

	page := filepath.Join(r.reportDir, reports.HTMLFile)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var stdout, stderr bytes.Buffer

	cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
		"--user-data-dir="+GinkgoT().TempDir(), "--dump-dom", "file://"+page)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chromium: %w\n%s", err, stderr.String())
	}

	// Chromium's own pages log too: under load its new-tab UI warned "Slow
	// network is detected" about a font of its own (source: chrome://…),
	// nothing of the report's.
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") && !strings.Contains(line, "source: chrome://") {
			return fmt.Errorf("console message loading report.html: %s", line)
		}
	}

	dom := stdout.String()

	faults := 0
	for _, e := range r.res.History.Entries {
		if e.Fault != nil && e.Fault.Phase == history.FaultStarted {
			faults++
		}
	}

	switch {
	case strings.Count(dom, `<g class="lane"`) != len(r.res.History.Nodes):
		return fmt.Errorf("report.html in the browser has %d lanes, want one per node (%d)", strings.Count(dom, `<g class="lane"`), len(r.res.History.Nodes))
	case strings.Count(dom, `<g class="fault-band"`) != faults:
		return fmt.Errorf("report.html in the browser has %d fault bands, want %d", strings.Count(dom, `<g class="fault-band"`), faults)
	case !strings.Contains(dom, `id="verdict"`) || !strings.Contains(dom, `id="members-chart"`) || !strings.Contains(dom, `id="checks"`):
		return fmt.Errorf("report.html in the browser lacks the verdict, the members chart or the checks")
	}

	return nil
}

// rejudged judges the run again from its report.json alone, as `talchaos
// report --rejudge` does: the verdict, outcome and diagnoses must be the run's.
func (r *recordedRun) rejudged(sc *scenario.Scenario) error {
	back, err := reports.ReadJSON(filepath.Join(r.reportDir, reports.JSONFile))
	if err != nil {
		return err
	}

	if back.History == nil {
		return fmt.Errorf("report.json has no history")
	}

	v := judge.Judge(*back.History, sc.Expect)

	switch {
	case v.Verdict != r.res.Verdict:
		return fmt.Errorf("rejudged verdict %s, the run's %s", v.Verdict, r.res.Verdict)
	case !reflect.DeepEqual(v.Diagnoses, r.res.Diagnoses):
		return fmt.Errorf("rejudged diagnoses differ:\n%+v\nthe run's:\n%+v", v.Diagnoses, r.res.Diagnoses)
	case !reflect.DeepEqual(v.Checks, r.res.Checks):
		return fmt.Errorf("rejudged checks differ:\n%+v\nthe run's:\n%+v", v.Checks, r.res.Checks)
	case v.Outcome.Converged != r.res.Outcome.Converged || v.Outcome.Voters != r.res.Outcome.Voters || v.Outcome.Learners != r.res.Outcome.Learners:
		return fmt.Errorf("rejudged outcome %+v, the run's %+v", v.Outcome, r.res.Outcome)
	}

	return nil
}

// leaks scans the output and every report file for every secret of each
// provisioned cluster's secrets bundle and talosconfig, in every form.
func (r *recordedRun) leaks() []string {
	Expect(r.clusters).NotTo(BeEmpty(), "no cluster recorded")

	texts, err := secretscan.Files(r.reportDir)
	Expect(err).NotTo(HaveOccurred())
	Expect(texts).To(HaveLen(4)) // report.json, junit.xml, summary.md, report.html

	texts["output"] = r.output

	var hits []string

	for _, c := range r.clusters {
		secrets, err := secretscan.Values(c.Bundle(), c.Talosconfig())
		Expect(err).NotTo(HaveOccurred())
		Expect(len(secrets)).To(BeNumerically(">", 10))

		for where, text := range texts {
			hits = append(hits, secretscan.Find(where, text, secrets)...)
		}
	}

	return hits
}

// recordingTarget is the sim target, keeping the clusters it provisions.
type recordingTarget struct {
	sim.Target

	mu       sync.Mutex
	clusters []*sim.Cluster
}

func (t *recordingTarget) Provision(ctx context.Context, sc *scenario.Scenario, opts target.Options) (target.Cluster, error) {
	c, err := t.Target.Provision(ctx, sc, opts)
	if sc, ok := c.(*sim.Cluster); ok && sc != nil {
		t.mu.Lock()
		t.clusters = append(t.clusters, sc)
		t.mu.Unlock()
	}

	return c, err
}

func (t *recordingTarget) recorded() []*sim.Cluster {
	t.mu.Lock()
	defer t.mu.Unlock()

	return slices.Clone(t.clusters)
}

// explain lists the failed checks, the diagnoses and the last events.
func explain(res *result.Result) string {
	var b strings.Builder

	events := res.Events
	if len(events) > 60 {
		events = events[len(events)-60:]
	}

	for _, e := range events {
		fmt.Fprintf(&b, "%6dms %-4s %s %s\n", e.TMs, e.Node, e.Kind, e.Msg)
	}

	// The failed checks and the diagnoses with their evidence come last: a
	// CI log that keeps only the tail of the output keeps them.
	for _, c := range res.Checks {
		if !c.Passed {
			fmt.Fprintf(&b, "check %s: expected %s, actual %s\n", c.Name, c.Expected, c.Actual)
		}
	}

	for _, d := range res.Diagnoses {
		fmt.Fprintf(&b, "diagnosis %s on %s: %s (%s)\n", d.Code, d.Node, d.Message, d.Evidence)
	}

	return b.String()
}

// heavy is a built-in's decorators: Serial for one with Kubernetes (its nine
// control-plane processes and kubelets load a 2-core machine by themselves)
// when the suite runs in parallel processes (make test), and the label
// "long" for those make test leaves to make test-long (longBuiltins).
func heavy(name string) []any {
	data, file, err := scenarios.Read(name)
	if err != nil {
		return nil
	}

	var out []any

	// And one with cluster.network: the processes share one namespace,
	// where two such runs would want the same addresses.
	if sc, err := chaos.Parse(file, data); err == nil && (sc.Cluster.Kubernetes || sc.Cluster.Network != nil) {
		out = append(out, Serial)
	}

	if _, ok := longBuiltins[name]; ok {
		out = append(out, Label("long"))
	}

	return out
}

// longBuiltins run in make test-long only, each with why: make test's 15
// minutes on 2 cores.
var longBuiltins = map[string]string{
	"upgrade-member-down":                    "a rolling upgrade of 20 Talos minutes; upgrade-interrupted shows the rolling upgrade in make test",
	"upgrade-member-down-resilient":          "its resilient pair",
	"too-many-learners-kubernetes":           "too-many-learners with the real Kubernetes control plane, run alone (heavy); happy-path-kubernetes shows Kubernetes in make test",
	"too-many-learners-kubernetes-resilient": "its resilient pair",
}

// skipUnsupported skips a scenario with a fault the sim cannot inject on
// this machine, saying why (slow-disk needs seccomp user notification).
func skipUnsupported(sc *scenario.Scenario) {
	for _, f := range sc.Faults {
		k, ok := f.Spec.(chaos.Kind)
		if !ok {
			continue
		}

		for _, c := range k.Needs(sc) {
			if err := (sim.Target{}).Supports(c, ""); err != nil {
				Skip(fmt.Sprintf("%s: %v", f.Name, err))
			}
		}
	}
}

// skipWithoutKubernetes skips a scenario with Kubernetes, saying why, where
// it cannot run (make test builds the binary; the addresses need root).
func skipWithoutKubernetes(sc *scenario.Scenario) {
	if !sc.Cluster.Kubernetes {
		return
	}

	if err := sim.KubernetesAvailable(); err != nil {
		Skip(err.Error())
	}
}
