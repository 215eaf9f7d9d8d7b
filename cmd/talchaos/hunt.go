package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/seedpool"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

type huntOptions struct {
	runOptions
	seeds    string
	parallel int
	shrink   bool
	rate     float64
	shard    string
	// stamp is the shard's stamp its hunt.json carries (nil: the whole run).
	stamp *shard.Stamp
}

func newHuntCmd() *cobra.Command {
	opts := huntOptions{}

	cmd := &cobra.Command{
		Use:   "hunt SCENARIO --seeds FROM-TO",
		Short: "Run a scenario over many seeds and measure how often its expectations hold",
		Long: `Run a scenario once per seed and report the rate at which its expectations held,
with its Wilson 95 % interval, the p50/p95 time to the outcome and the distinct
outcomes (verdict and diagnoses) with their seeds, each reproducible with
'talchaos run ... --seed N'. Writes REPORT-DIR/hunt.json, junit.xml (a test case
per seed), summary.md and seed-N/. Exit code 0 when every seed passed, 1 when
one failed; 3 when the only trouble was runs voided by a stall of the host (their
expectations failed while talchaos did not run: counted void, outside the rate).

With --shard K/N it runs only its part of the seeds (the same on every machine)
and stamps hunt.json with it; 'talchaos merge' combines the N shards' directories
into the hunt an unsharded run writes.

` + shrinkFlagsHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.shrink {
				return runShrink(cmd, args[0], opts)
			}

			if cmd.Flags().Changed("rate") {
				return &exitError{code: exitInput, err: errors.New("--rate is for --shrink")}
			}

			_, err := runHunt(cmd, args[0], opts)

			return err
		},
	}

	cmd.Flags().StringVar(&opts.seeds, "seeds", "1-10", "seeds to run: FROM-TO or a comma-separated list")
	cmd.Flags().IntVar(&opts.parallel, "parallel", defaultParallel(), "seeds run at once (simulated nodes; each cluster has its own addresses; a run of a Kubernetes or large cluster counts as 2 or more)")
	cmd.Flags().StringVar(&opts.target, "target", "sim", "where the nodes run: sim, container (one Docker container per node), or real (with --inventory)")
	cmd.Flags().StringVar(&opts.inventory, "inventory", "", "inventory file of a real cluster (--target=real)")
	cmd.Flags().BoolVar(&opts.allowDestructive, "allow-destructive", false, "permit destructive faults on real nodes")
	cmd.Flags().StringVar(&opts.reportDir, "report-dir", "talchaos-hunt", "directory for the per-seed reports")
	cmd.Flags().BoolVar(&opts.shrink, "shrink", false, "then minimise the scenario while it keeps its outcome (see above)")
	cmd.Flags().Float64Var(&opts.rate, "rate", 0.8, "with --shrink: the fraction of the seeds a smaller scenario must keep the outcome on")
	addShardFlag(cmd, &opts.shard)
	addTimeScaleFlag(cmd, &opts.timeScale, "the scenario's timeScale")

	return cmd
}

// runHunt is the hunt command: it checks its input, then hunts. The hunt is
// returned also when seeds failed (the error is then an exitFail).
func runHunt(cmd *cobra.Command, arg string, opts huntOptions) (*reports.Hunt, error) {
	seeds, err := parseSeeds(opts.seeds)
	if err != nil {
		return nil, &exitError{code: exitInput, err: err}
	}

	if err := checkParallel(opts.parallel); err != nil {
		return nil, &exitError{code: exitInput, err: err}
	}

	if err := checkTimeScale(cmd, opts.timeScale); err != nil {
		return nil, &exitError{code: exitInput, err: err}
	}

	sh, err := shardOf(cmd, opts.shard)
	if err != nil {
		return nil, &exitError{code: exitInput, err: err}
	}

	if opts.shrink && !sh.Whole() {
		return nil, &exitError{code: exitInput, err: fmt.Errorf("--shrink judges every reduction on every seed: it cannot run shard %s", sh)}
	}

	sc, err := loadScenarioAt(arg, opts.timeScale)
	if err != nil {
		return nil, &exitError{code: exitInput, err: err}
	}

	tgt, err := targetFor(opts.runOptions)
	if err != nil {
		return nil, &exitError{code: exitInput, err: err}
	}

	if tgt.Name() == "real" {
		// The default is for simulated nodes; a real cluster runs one seed at a time.
		if f := cmd.Flags().Lookup("parallel"); f != nil && f.Changed && opts.parallel > 1 {
			return nil, &exitError{code: exitInput, err: errors.New("--parallel is for simulated nodes: a real cluster runs one seed at a time")}
		}

		opts.parallel = 1
	}

	// Created only once every input is known to be good.
	if err := reports.CheckDir(opts.reportDir); err != nil {
		return nil, &exitError{code: exitInput, err: fmt.Errorf("--report-dir: %w", err)}
	}

	if needsNetns(tgt.Name(), sc) {
		if ok, err := runInNetns(cmd); ok {
			return nil, err
		}
	}

	defer guardRun(cmd.ErrOrStderr())()

	if !sh.Whole() {
		plan := shard.NewPlan(sh, []string{sc.Name}, seeds)
		plan.TimeScale = opts.timeScale
		seeds, opts.stamp = plan.SeedsOf(sc.Name), plan.Stamp()
		printShard(cmd, plan, len(seeds))
	}

	return hunt(cmd.Context(), cmd.OutOrStdout(), sc, tgt, seeds, arg, opts)
}

// hunt runs sc on tgt over the seeds, opts.parallel at a time, writes the
// hunt's reports into opts.reportDir (checked by the caller) and prints its
// summary: what `hunt` and `nightly` (one built-in after another) do. The
// hunt is returned also when seeds failed (the error is then an exitFail).
func hunt(ctx context.Context, out io.Writer, sc *scenario.Scenario, tgt target.Target, seeds []int64, arg string, opts huntOptions) (*reports.Hunt, error) {
	if err := os.MkdirAll(opts.reportDir, 0o755); err != nil { //nolint:gosec // reports are meant to be read
		return nil, &exitError{code: exitHarness, err: err}
	}

	started := time.Now()
	bar := newHuntProgress(out, len(seeds), isTerminal(out))

	runs, stop, inputErr := huntSeeds(ctx, sc, tgt, seeds, arg, opts, bar)
	if inputErr != nil {
		return nil, &exitError{code: exitInput, err: inputErr}
	}

	bar.done()

	// A shard may have no seed of its own (more shards than seeds): its
	// empty hunt.json still says so to merge.
	if len(runs) == 0 && len(seeds) > 0 {
		if stop == nil {
			stop = errors.New("interrupted")
		}

		return nil, &exitError{code: exitHarness, err: fmt.Errorf("%w before the first seed finished", stop)}
	}

	h := huntOf(sc.Name, tgt, runs, started, time.Since(started), opts)

	if _, err := reports.WriteHunt(opts.reportDir, h); err != nil {
		return nil, &exitError{code: exitHarness, err: err}
	}

	printHunt(out, h)
	fmt.Fprintf(out, "reports in %s (hunt.json, junit.xml, summary.md, seed-N/)\n", opts.reportDir)

	if stop != nil {
		return h, &exitError{code: exitHarness, err: stop}
	}

	return h, huntVerdictOf(h)
}

// huntOf is the hunt of a scenario's finished runs (in seed order).
func huntOf(name string, tgt target.Target, runs []reports.HuntRun, started time.Time, wall time.Duration, opts huntOptions) *reports.Hunt {
	statRuns := make([]stats.Run, len(runs))
	for i, r := range runs {
		statRuns[i] = r.Run
	}

	return &reports.Hunt{
		Scenario: name, Target: tgt.Name(), Started: started, WallMs: wall.Milliseconds(),
		Parallel: opts.parallel, Tool: buildinfo.Read().String(), TimeScale: opts.timeScale, Shard: opts.stamp, Summary: stats.Summarize(name, statRuns), Runs: runs,
	}
}

// printHunt prints a hunt's summary: its rate and the outcomes with their
// replay commands.
func printHunt(out io.Writer, h *reports.Hunt) {
	sum := h.Summary
	fmt.Fprintf(out, "\n%s: expectations held for %d of %d seeds (rate %.2f, 95%% interval %.2f-%.2f); time to the outcome p50 %s, p95 %s; %s wall at %d at a time\n",
		h.Scenario, sum.Passed, sum.Judged(), sum.Rate, sum.Low, sum.High, reports.Millis(sum.P50Ms), reports.Millis(sum.P95Ms), reports.Millis(h.WallMs), h.Parallel)

	if sum.Void > 0 {
		fmt.Fprintf(out, "  %d of %d runs void (%s); the numbers are of the other %d\n", sum.Void, sum.Runs, reports.VoidWhy, sum.Judged())
	}

	if sum.Unstruck > 0 {
		fmt.Fprintf(out, "  %s\n", reports.UnstruckNote(h))
	}

	for _, o := range sum.Outcomes {
		fmt.Fprintf(out, "  %-40s %3d seed(s)  replay: %s\n", o.Key(), len(o.Seeds), o.Replay)
	}
}

// huntVerdictOf says how a hunt exits: 1 when a judged seed did not pass;
// else 3 when a seed's run was void (the host stalled: it was not judged).
func huntVerdictOf(h *reports.Hunt) error {
	switch s := h.Summary; {
	case s.Passed < s.Judged():
		return &exitError{code: exitFail}
	case s.Void > 0:
		return &exitError{code: exitHarness, err: voidRunsError{void: s.Void, runs: s.Runs}}
	}

	return nil
}

// voidRunsError is a hunt that failed nowhere but had runs voided by a stall
// of the host.
type voidRunsError struct{ void, runs int }

func (e voidRunsError) Error() string {
	return fmt.Sprintf("%d of %d runs were void (%s): run them again", e.void, e.runs, reports.VoidWhy)
}

// huntSeeds runs the seeds, opts.parallel at a time, each into its own report
// directory, and returns the finished ones in seed order. A signal stops the
// hunt: runs in flight end as interrupted and are not counted.
func huntSeeds(ctx context.Context, sc *scenario.Scenario, tgt target.Target, seeds []int64, arg string, opts huntOptions, bar *huntProgress) ([]reports.HuntRun, error, error) {
	var (
		mu       sync.Mutex
		runs     []reports.HuntRun
		stop     error
		inputErr error
	)

	// first keeps the first of the errors that end the hunt.
	first := func(target *error, err error) {
		mu.Lock()
		defer mu.Unlock()

		if *target == nil {
			*target = err
		}
	}

	weight := func(int64) int { return slots(sc, tgt) }

	seedpool.RunWeighted(ctx, seeds, opts.parallel, weight, func(seed int64) bool {
		r := runSeed(ctx, sc, tgt, seed, arg, opts)

		switch {
		case r.inputErr != nil:
			first(&inputErr, r.inputErr)

			return false
		case r.stop != nil:
			first(&stop, r.stop)
		}

		if r.written {
			// An interrupted seed is neither a pass nor a failure.
			bar.finished(r.run, r.interrupted)
		}

		if r.counted() {
			mu.Lock()
			runs = append(runs, r.run)
			mu.Unlock()
		}

		return r.counted()
	})

	if stop == nil && ctx.Err() != nil {
		stop = interruptedRun(ctx, ctx.Err())
	}

	slices.SortFunc(runs, func(a, b reports.HuntRun) int { return cmp.Compare(a.Seed, b.Seed) })

	return runs, stop, inputErr
}

// seedRun is one seed of a hunt or a night, run and written.
type seedRun struct {
	run         reports.HuntRun
	written     bool  // its report is written
	interrupted bool  // a signal cut it short: neither a pass nor a failure
	inputErr    error // the scenario is bad input: nothing more to run
	stop        error // what ends the hunt: the interruption, a report not written
}

// counted: the run counts, and the next seed may start.
func (r seedRun) counted() bool { return r.written && !r.interrupted }

// runSeed runs one seed of sc into opts.reportDir/seed-N.
func runSeed(ctx context.Context, sc *scenario.Scenario, tgt target.Target, seed int64, arg string, opts huntOptions) seedRun {
	replay := replayCommand(arg, opts.runOptions, seed)

	res, err := harness.Run(ctx, sc, harness.Options{
		Target: tgt, Seed: seed, AllowDestructive: opts.allowDestructive, Replay: replay,
	})
	if err != nil && harness.IsInputError(err) {
		return seedRun{inputErr: err}
	}

	var out seedRun

	if ierr := interruptedRun(ctx, err); ierr != err { //nolint:errorlint // identity: was it replaced
		out.interrupted = true
		res.Error = ierr.Error()
		out.stop = ierr
	}

	rel := fmt.Sprintf("seed-%d", seed)
	if _, werr := reports.Write(filepath.Join(opts.reportDir, rel), res); werr != nil {
		if out.stop == nil {
			out.stop = werr
		}

		return out
	}

	out.written = true
	out.run = reports.HuntRun{Run: stats.Run{
		Seed: seed, Verdict: huntVerdict(res), Diagnoses: diagnosisCodes(res), DurationMs: res.DurationMs, Replay: replay,
		Unfired: reports.Unfired(res),
	}, Report: rel, Failure: firstFailure(res)}

	return out
}

func huntVerdict(res *result.Result) string {
	switch {
	case res.Verdict == result.Pass:
		return stats.Pass
	case res.Voided:
		return stats.Void
	case res.Error != "":
		return stats.Error
	}

	return stats.Fail
}

func diagnosisCodes(res *result.Result) []string {
	var out []string
	for _, d := range res.Diagnoses {
		out = append(out, d.Code)
	}

	return out
}

func firstFailure(res *result.Result) string {
	if res.Error != "" {
		return res.Error
	}

	for _, c := range res.Checks {
		if !c.Passed {
			return fmt.Sprintf("%s: expected %s, actual %s", c.Name, c.Expected, c.Actual)
		}
	}

	return ""
}
