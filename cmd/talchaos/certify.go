package main

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/seedpool"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim"
)

type certifyOptions struct {
	huntOptions
	only      []string
	failOn    []string
	timeScale float64
	upgrades  bool
}

func newCertifyCmd() *cobra.Command {
	opts := certifyOptions{}

	cmd := &cobra.Command{
		Use:   "certify [--seeds A-B] [--scenario NAME ...] [--parallel P] [--out DIR] [--fail-on LIST] -- COMMAND [ARGS...]",
		Short: "Run your own bootstrap command against every failure the catalogue reproduces, and say how it did",
		Long: `certify runs COMMAND as the bootstrap of every built-in scenario (or those named
with --scenario, built-ins or files): the scenario's cluster and faults, over the
seeds, with COMMAND in place of its orchestrator and the exec orchestrator's
environment (TALOSCONFIG, TALCHAOS_NODES, TALCHAOS_CONTROLPLANES, TALCHAOS_WORKERS,
TALCHAOS_BOOTSTRAP_NODE, TALCHAOS_CONFIG_<NODE>, KUBECONFIG with Kubernetes, ...).
Each run is classified from the command's exit status and the judged outcome of
the cluster (the same judge and diagnoses as 'run'):

  survived     exit 0, and the cluster converged (and every node upgraded, in a
               scenario with a rolling upgrade)
  loud         non-zero exit, not converged: an honest failure
  false-alarm  non-zero exit, but the cluster converged
  silent       exit 0, but the cluster did not converge: the command lied
  hung         still running when the scenario's time was up (killed, with its children)
  void         the host stalled while the expectations failed: it says nothing of COMMAND

Each scenario says what a good bootstrap does under it (certify.expected):
survivable faults expect survived, unsurvivable ones (an invalid config, a PKI
mismatch) expect loud. Writes OUT/certify.json, junit.xml (a test
case per scenario and seed, failing when the outcome is worse than expected),
summary.md (the scorecard), index.html and each run's report in
OUT/SCENARIO/seed-N/. Exit code 1 when a run's outcome is in --fail-on, else 3
when a run was void (run it again), 0 otherwise, 2 for bad input.

The simulated cluster runs at the scenario's time scale (Talos timers divided,
60 for most built-ins) while COMMAND runs on real time: its own waits and
timeouts are long by the cluster's clock. --time-scale slows every scenario's
cluster down for a command that polls slowly (the built-ins were tuned at their
own scale; a few outcomes may differ at another).

The scenarios with a rolling upgrade after the bootstrap (orchestrator.upgradeTo)
run only with --upgrades: COMMAND then also upgrades every node, one after
another, to the installer image in TALCHAOS_UPGRADE_IMAGE once its bootstrap is
done. Without --upgrades they are skipped, saying so.

With --shard K/N it runs only shard K of the (scenario, seed) pairs of the
scenarios it would run, the same on every machine, and stamps certify.json with
it; 'talchaos merge' combines the N shards' directories into the certification
an unsharded run writes.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || cmd.ArgsLenAtDash() != 0 {
				return &exitError{code: exitInput, err: errors.New("certify needs the bootstrap command after --: talchaos certify [flags] -- COMMAND [ARGS...]")}
			}

			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runCertify(cmd, args, opts) },
	}

	f := cmd.Flags()
	f.StringVar(&opts.seeds, "seeds", "1", "seeds to run each scenario with: FROM-TO or a comma-separated list")
	f.IntVar(&opts.parallel, "parallel", defaultParallel(), "runs at once (simulated nodes; each cluster has its own addresses; a run of a Kubernetes or large cluster counts as 2 or more)")
	f.StringVar(&opts.reportDir, "out", "talchaos-certify", "directory for everything certify writes")
	f.StringSliceVar(&opts.only, "scenario", nil, "run only these scenarios: built-in names or files (repeat or comma-separate)")
	f.StringSliceVar(&opts.failOn, "fail-on", []string{reports.Silent, reports.Hung}, "outcomes that make certify exit 1: "+strings.Join(reports.CertifyOutcomes, ", "))
	f.StringVar(&opts.target, "target", "sim", "where the nodes run: sim, container (one Docker container per node), or real (with --inventory)")
	f.StringVar(&opts.inventory, "inventory", "", "inventory file of a real cluster (--target=real)")
	f.BoolVar(&opts.allowDestructive, "allow-destructive", false, "permit destructive faults on real nodes")
	f.Float64Var(&opts.timeScale, "time-scale", 0, "run every scenario at this time scale (>= 1; default: each scenario's own)")
	f.BoolVar(&opts.upgrades, "upgrades", false, "COMMAND also runs a rolling upgrade (to $TALCHAOS_UPGRADE_IMAGE): run the scenarios that have one")
	addShardFlag(cmd, &opts.shard)

	return cmd
}

// certifyJob is one scenario × seed.
type certifyJob struct {
	sc   *scenario.Scenario
	arg  string
	seed int64
}

func runCertify(cmd *cobra.Command, command []string, opts certifyOptions) error {
	out := cmd.OutOrStdout()

	seeds, err := parseSeeds(opts.seeds)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if err := checkParallel(opts.parallel); err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if cmd.Flags().Changed("time-scale") && !(opts.timeScale >= 1 && opts.timeScale <= 1000) {
		return &exitError{code: exitInput, err: fmt.Errorf("--time-scale %v: must be between 1 and 1000", opts.timeScale)}
	}

	for _, o := range opts.failOn {
		if !slices.Contains(reports.CertifyOutcomes, o) {
			return &exitError{code: exitInput, err: fmt.Errorf("--fail-on %s: not an outcome (%s)", quoteShort(o), strings.Join(reports.CertifyOutcomes, ", "))}
		}
	}

	sh, err := shardOf(cmd, opts.shard)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	tgt, err := targetFor(opts.runOptions)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if tgt.Name() == "real" {
		if cmd.Flags().Changed("parallel") && opts.parallel > 1 {
			return &exitError{code: exitInput, err: errors.New("--parallel is for simulated nodes: a real cluster runs one scenario at a time")}
		}

		opts.parallel = 1
	}

	picked, skipped, err := certifyScenarios(cmd.Flags().Changed("scenario"), opts.only, tgt, opts.allowDestructive, opts.upgrades)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if err := reports.CheckDir(opts.reportDir); err != nil {
		return &exitError{code: exitInput, err: fmt.Errorf("--out: %w", err)}
	}

	var scs []*scenario.Scenario
	for _, p := range picked {
		scs = append(scs, p.sc)
	}

	// The command runs in it too: its talosctl reaches the nodes there.
	if needsNetns(tgt.Name(), scs...) {
		if ok, err := runInNetns(cmd); ok {
			return err
		}
	}

	defer guardRun(cmd.ErrOrStderr())()

	byName := map[string]certifyPick{}
	names := make([]string, len(picked))

	for i, p := range picked {
		byName[p.sc.Name], names[i] = p, p.sc.Name
	}

	// The pairs are split over the scenarios this machine runs: a shard
	// whose machine skipped another set says so in its file, and merge
	// refuses it.
	var (
		plan = shard.NewPlan(sh, names, seeds)
		jobs []certifyJob
	)

	plan.TimeScale = opts.timeScale

	if sh.Whole() {
		for _, p := range picked {
			for _, s := range seeds {
				jobs = append(jobs, certifyJob{sc: p.sc, arg: p.arg, seed: s})
			}
		}
	} else {
		for _, pr := range plan.Pairs() {
			jobs = append(jobs, certifyJob{sc: byName[pr.Scenario].sc, arg: byName[pr.Scenario].arg, seed: pr.Seed})
		}

		printShard(cmd, plan, len(jobs))
	}

	jobs = roundRobin(jobs, func(j certifyJob) string { return j.sc.Name })

	c := &reports.Certify{
		Command: command, Target: tgt.Name(), Seeds: seeds, Started: time.Now().UTC(), Parallel: opts.parallel,
		Tool: buildinfo.Read().String(), FailOn: opts.failOn, Skipped: skipped, Shard: plan.Stamp(),
	}

	for _, p := range picked {
		c.Results = append(c.Results, reports.CertifyScenario{Name: p.sc.Name, Description: p.sc.Description, Expected: p.sc.Certify.Expected})
	}

	bar := newHuntProgress(out, len(jobs), isTerminal(out))

	var (
		mu   sync.Mutex
		runs []reports.CertifyRun
		stop error
	)

	indexes := make([]int64, len(jobs))
	for i := range jobs {
		indexes[i] = int64(i)
	}

	weight := func(i int64) int { return slots(jobs[i].sc, tgt) }

	seedpool.RunWeighted(cmd.Context(), indexes, opts.parallel, weight, func(i int64) bool {
		job := jobs[i]

		run, err := certifyRun(cmd, job, command, opts)

		mu.Lock()
		defer mu.Unlock()

		if err != nil {
			if stop == nil {
				stop = err
			}

			return false
		}

		runs = append(runs, run)

		held := stats.Fail

		switch {
		case run.Outcome == reports.Void:
			held = stats.Void
		case reports.CertifyHeld(run.Outcome, run.Expected):
			held = stats.Pass
		}

		bar.line(fmt.Sprintf("%-36s seed %-4d %-11s %6.1fs  expected %s", job.sc.Name, job.seed, run.Outcome, float64(run.DurationMs)/1000, run.Expected), held, true)

		return true
	})

	bar.done()

	if stop == nil && cmd.Context().Err() != nil {
		stop = interruptedRun(cmd.Context(), cmd.Context().Err())
	}

	for i := range c.Results {
		for _, r := range runs {
			if r.Scenario == c.Results[i].Name {
				c.Results[i].Runs = append(c.Results[i].Runs, r)
			}
		}

		slices.SortFunc(c.Results[i].Runs, func(a, b reports.CertifyRun) int { return cmp.Compare(a.Seed, b.Seed) })
	}

	c.WallMs = time.Since(c.Started).Milliseconds()

	if err := reports.WriteCertify(opts.reportDir, c); err != nil {
		return &exitError{code: exitHarness, err: err}
	}

	fmt.Fprintf(out, "\n%s", reports.CertifySummary(c))
	fmt.Fprintf(out, "\ncertify.json, junit.xml, summary.md, index.html and the runs' reports in %s\n", opts.reportDir)

	if stop != nil {
		return &exitError{code: exitHarness, err: stop}
	}

	return certifyVerdictOf(c)
}

// certifyVerdictOf says how a certification exits: 1 when a run's outcome
// is one of its --fail-on, else 3 when a run was void.
func certifyVerdictOf(c *reports.Certify) error {
	var bad []string

	for _, s := range c.Results {
		for _, r := range s.Runs {
			if slices.Contains(c.FailOn, r.Outcome) {
				bad = append(bad, fmt.Sprintf("%s seed %d: %s", r.Scenario, r.Seed, r.Outcome))
			}
		}
	}

	if len(bad) > 0 {
		slices.Sort(bad)

		return &exitError{code: exitFail, err: fmt.Errorf("outcomes in --fail-on %s: %s", strings.Join(c.FailOn, ","), strings.Join(bad, "; "))}
	}

	// A void run certifies nothing: as a hunt's, it makes the exit 3.
	if void, runs := c.VoidRuns(); void > 0 {
		return &exitError{code: exitHarness, err: voidRunsError{void: void, runs: runs}}
	}

	return nil
}

// certifyRun runs one scenario × seed with command as its orchestrator and
// classifies it. An error ends certify: bad input, or the run interrupted.
func certifyRun(cmd *cobra.Command, job certifyJob, command []string, opts certifyOptions) (reports.CertifyRun, error) {
	sc := job.sc.ForCertify(scenario.Orchestrator{Name: "exec", Command: command}, opts.timeScale)

	scale := ""
	if opts.timeScale > 0 {
		scale = fmt.Sprintf(" --time-scale %v", opts.timeScale)
	}

	replay := fmt.Sprintf("talchaos certify --scenario %s --seeds %d --target %s%s -- %s", shellQuote(job.arg), job.seed, opts.target, scale, shellQuoteAll(command))

	tgt, err := targetFor(opts.runOptions)
	if err != nil {
		return reports.CertifyRun{}, &exitError{code: exitInput, err: err}
	}

	res, err := harness.Run(cmd.Context(), sc, harness.Options{
		Target: tgt, Seed: job.seed, AllowDestructive: opts.allowDestructive, Replay: replay, UntilConverged: true,
	})
	if err != nil && harness.IsInputError(err) {
		return reports.CertifyRun{}, &exitError{code: exitInput, err: err}
	}

	if ierr := interruptedRun(cmd.Context(), err); ierr != err { //nolint:errorlint // identity: was it replaced
		return reports.CertifyRun{}, ierr
	}

	rel := filepath.Join(sc.Name, fmt.Sprintf("seed-%d", job.seed))
	if _, werr := reports.Write(filepath.Join(opts.reportDir, rel), res); werr != nil {
		return reports.CertifyRun{}, &exitError{code: exitHarness, err: werr}
	}

	run := reports.CertifyRun{
		Scenario: sc.Name, Seed: job.seed, Outcome: reports.Classify(res), Expected: sc.Certify.Expected,
		Diagnoses: diagnosisCodes(res), Report: rel, Replay: replay, DurationMs: res.DurationMs, Error: res.Error,
	}

	if res.Orchestrator != nil {
		run.ExitCode = res.Orchestrator.ExitCode
	}

	if run.Diagnoses == nil {
		run.Diagnoses = []string{}
	}

	return run, nil
}

// certifyPick is a scenario certify runs, with how it was named.
type certifyPick struct {
	sc  *scenario.Scenario
	arg string
}

// certifyScenarios are the scenarios to run: the named ones (each must say
// what it expects), or every built-in that does not skip certify. A built-in
// the target cannot run (Kubernetes where it cannot run, a fault the target
// cannot carry out or may not) is skipped, saying why; a named one is an
// error.
func certifyScenarios(named bool, only []string, tgt target.Target, allowDestructive, upgrades bool) ([]certifyPick, []reports.CertifySkip, error) {
	if named && len(only) == 0 {
		return nil, nil, errors.New("--scenario: no scenario named (leave the flag out to run the whole catalogue)")
	}

	args := only
	if !named {
		args = scenarios.Names()
	}

	kube := sim.KubernetesAvailable()
	if tgt.Name() != "sim" {
		kube = nil // the target's own check says
	}

	var (
		picked  []certifyPick
		skipped []reports.CertifySkip
		seen    = map[string]bool{}
	)

	for _, arg := range args {
		sc, err := loadScenario(arg)
		if err != nil {
			return nil, nil, err
		}

		if seen[sc.Name] {
			return nil, nil, fmt.Errorf("--scenario %s: named twice", quoteShort(arg))
		}

		seen[sc.Name] = true

		switch {
		case sc.Certify.Skip != "" && named:
			return nil, nil, fmt.Errorf("--scenario %s: certify skips it: %s", quoteShort(arg), sc.Certify.Skip)
		case sc.Certify.Skip != "":
			skipped = append(skipped, reports.CertifySkip{Name: sc.Name, Reason: sc.Certify.Skip})
		case sc.Certify.Expected == "":
			return nil, nil, fmt.Errorf("--scenario %s: it does not say what a good bootstrap does there (certify.expected: survived or loud)", quoteShort(arg))
		case sc.Orchestrator.UpgradeTo != "" && !upgrades && named:
			return nil, nil, fmt.Errorf("--scenario %s: %s", quoteShort(arg), noUpgrades)
		case sc.Orchestrator.UpgradeTo != "" && !upgrades:
			skipped = append(skipped, reports.CertifySkip{Name: sc.Name, Reason: noUpgrades})
		case sc.Cluster.Kubernetes && kube != nil && named:
			return nil, nil, fmt.Errorf("--scenario %s: %w", quoteShort(arg), kube)
		case sc.Cluster.Kubernetes && kube != nil:
			skipped = append(skipped, reports.CertifySkip{Name: sc.Name, Reason: kube.Error()})
		default:
			if _, err := chaos.Plan(sc, tgt, chaos.PlanOptions{Seed: 1, AllowDestructive: allowDestructive}); err != nil {
				if named {
					return nil, nil, err
				}

				skipped = append(skipped, reports.CertifySkip{Name: sc.Name, Reason: err.Error()})

				continue
			}

			picked = append(picked, certifyPick{sc: sc, arg: arg})
		}
	}

	if len(picked) == 0 {
		return nil, nil, errors.New("no scenario to certify against")
	}

	return picked, skipped, nil
}

// shellQuote is s as one word for a POSIX shell: as it is when it is plain,
// in single quotes otherwise (control characters escaped first, so that a
// replay command printed to a terminal stays text).
func shellQuote(s string) string {
	plain := s != ""

	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./=:,+@%", r)) {
			plain = false
		}
	}

	if plain {
		return s
	}

	if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		// Shown escaped ($'...' would be shell-specific): the line is for
		// a person to read before running it.
		q := strconv.Quote(s)
		s = q[1 : len(q)-1]
	}

	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellQuoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}

	return strings.Join(q, " ")
}

// noUpgrades is why certify skips a scenario with a rolling upgrade.
const noUpgrades = "it upgrades every node after the bootstrap: pass --upgrades when the command does that too (to $TALCHAOS_UPGRADE_IMAGE)"
