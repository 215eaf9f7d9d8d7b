package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
	"github.com/talchaos/talchaos/scenarios"
)

// nightlyAlpha is the significance level of the regression test.
const nightlyAlpha = 0.01

type nightlyOptions struct {
	huntOptions
	baseline string
	compare  string
	only     []string
	// files: the scenario files --scenario named, by the scenario's name
	// (built-ins are loaded by name).
	files map[string]string
}

func newNightlyCmd() *cobra.Command {
	opts := nightlyOptions{}

	cmd := &cobra.Command{
		Use:   "nightly [--seeds A-B] [--parallel P] [--baseline FILE] [--out DIR]",
		Short: "Run the catalogue over seeds, compare with the previous night's ledger, exit 1 on a significant regression",
		Long: `nightly runs every built-in scenario (or those named with --scenario: built-ins, and
your own scenario files, each under its name) once per seed,
all the (scenario, seed) pairs through one pool of --parallel runs at once (each
scenario's first seed, then each one's second, ...: a spell of trouble on the
runner costs every scenario a run, not one scenario its seeds), writes per
scenario its hunt (OUT/NAME: hunt.json, seed-N/) once its last seed is done, and over all of them
ledger.json (pass rate with its Wilson 95 % interval, p50/p95 time to the outcome and
the outcomes per scenario), junit.xml (a test suite per scenario, a test case per
seed), summary.md (ready for $GITHUB_STEP_SUMMARY) and index.html linking every
run's report.html.

With --baseline (the previous night's ledger.json) each scenario's pass count is
compared with a one-sided Fisher exact test at alpha = 0.01: exit code 1 when a
scenario passes significantly less often (regression, with its p-value); significant
improvements are printed too. Runs voided by a stall of the host (their expectations
failed while talchaos did not run) count as void, outside the rates and the test; a
scenario whose every run tonight was void exits 3 (the night cannot say). --compare
FILE compares a ledger already written instead of running anything.

With --shard K/N (or its environment variables, below) it runs only shard K of
the night's (scenario, seed) pairs — the same pairs on every machine, every pair
in one shard — and stamps ledger.json and each hunt.json with the shard, the
seeds, the scenarios and the talchaos build. 'talchaos merge' combines the N
shards' directories into the night's ledger, junit.xml, summary.md and
index.html, and runs the --baseline gate on the merged ledger.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNightly(cmd, opts) },
	}

	f := cmd.Flags()
	f.StringVar(&opts.seeds, "seeds", "1-3", "seeds to run each scenario with: FROM-TO or a comma-separated list")
	f.IntVar(&opts.parallel, "parallel", defaultParallel(), "runs at once, of any scenarios (a run of a Kubernetes or large cluster counts as 2 or more)")
	f.StringVar(&opts.reportDir, "out", "talchaos-nightly", "directory for everything nightly writes")
	f.StringVar(&opts.baseline, "baseline", "", "the previous night's ledger.json to compare with")
	f.StringVar(&opts.compare, "compare", "", "compare this ledger.json with --baseline instead of running")
	f.StringSliceVar(&opts.only, "scenario", nil, "run only these scenarios: built-in names or your own files, each by its name in the ledger (repeat or comma-separate)")
	addShardFlag(cmd, &opts.shard)
	addTimeScaleFlag(cmd, &opts.timeScale, "each scenario's own timeScale")

	opts.target = "sim"

	return cmd
}

func runNightly(cmd *cobra.Command, opts nightlyOptions) error {
	out := cmd.OutOrStdout()

	names, seeds, err := checkNightlyFlags(cmd, &opts)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	plan := shard.Plan{Scenarios: names, Seeds: seeds}

	if opts.compare == "" {
		sh, err := shardOf(cmd, opts.shard)
		if err != nil {
			return &exitError{code: exitInput, err: err}
		}

		// The gate compares whole nights: a shard's part would be
		// compared with a whole baseline.
		if !sh.Whole() && opts.baseline != "" {
			return &exitError{code: exitInput, err: fmt.Errorf("--baseline: shard %s holds part of the night; the gate runs on the merged ledger (talchaos merge SHARD_DIR... --baseline FILE)", sh)}
		}

		if !sh.Whole() {
			plan = shard.NewPlan(sh, names, seeds)
		}
	}

	plan.TimeScale = opts.timeScale

	baseline, err := readBaseline(opts.baseline)
	if err != nil {
		return err
	}

	if opts.compare != "" {
		if baseline == nil {
			return &exitError{code: exitInput, err: errors.New("--compare needs --baseline")}
		}

		current, err := stats.ReadLedger(opts.compare)
		if err != nil {
			return &exitError{code: exitInput, err: err}
		}

		if why := stats.Comparable(baseline, current); why != "" {
			return &exitError{code: exitInput, err: fmt.Errorf("--compare %s: %s", opts.compare, why)}
		}

		return verdictOf(termSafe(out), stats.Compare(baseline, current, nightlyAlpha))
	}

	// Refused before a night is spent on it.
	if why := stats.Comparable(baseline, &stats.Ledger{TimeScale: opts.timeScale}); why != "" {
		return &exitError{code: exitInput, err: fmt.Errorf("--baseline %s: %s", opts.baseline, why)}
	}

	if err := reports.CheckDir(opts.reportDir); err != nil {
		return &exitError{code: exitInput, err: fmt.Errorf("--out: %w", err)}
	}

	ledger := &stats.Ledger{Created: time.Now().UTC(), Tool: buildinfo.Read().String(), Shard: plan.Stamp(), TimeScale: opts.timeScale}

	tgt, err := targetFor(opts.runOptions)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	var scs []*scenario.Scenario

	for _, name := range names {
		if sc, err := loadScenario(opts.source(name)); err == nil {
			scs = append(scs, sc)
		}
	}

	if needsNetns(tgt.Name(), scs...) {
		if ok, err := runInNetns(cmd); ok {
			return err
		}
	}

	defer guardRun(cmd.ErrOrStderr())()

	pairs := plan.Pairs()
	printShard(cmd, plan, len(pairs))

	opts.stamp = plan.Stamp()

	seedsOf := func(name string) []int64 {
		if !plan.Shard.Whole() {
			return plan.SeedsOf(name)
		}

		return seeds
	}

	hunts, err := runNight(cmd.Context(), out, tgt, names, seedsOf, opts)
	if err != nil {
		return err
	}

	for _, h := range hunts {
		ledger.Scenarios = append(ledger.Scenarios, h.Summary)
	}

	slices.SortFunc(ledger.Scenarios, func(a, b stats.Summary) int { return strings.Compare(a.Scenario, b.Scenario) })

	return writeNight(out, opts.reportDir, ledger, hunts, baseline,
		fmt.Sprintf("\nnightly: %d run(s) of %d scenario(s)", len(pairs), len(hunts)))
}

// writeNight writes a night's ledger, junit.xml, summary.md and index.html
// into dir (its hunts are there already), says so after what, and gates it:
// what nightly does after its runs, and merge after reading a night's
// shards. It exits 1 when a scenario regressed against the baseline.
func writeNight(out io.Writer, dir string, ledger *stats.Ledger, hunts []*reports.Hunt, baseline *stats.Ledger, what string) error {
	if err := ledger.Write(filepath.Join(dir, reports.LedgerFile)); err != nil {
		return &exitError{code: exitHarness, err: err}
	}

	changes := stats.Compare(baseline, ledger, nightlyAlpha)

	if err := reports.WriteNightly(dir, hunts, changes, baseline != nil); err != nil {
		return &exitError{code: exitHarness, err: err}
	}

	fmt.Fprintf(out, "%s; ledger, junit.xml, summary.md and index.html in %s\n", what, dir)

	if baseline == nil {
		fmt.Fprintln(out, "no --baseline: nothing to compare with")

		return nil
	}

	return verdictOf(out, changes)
}

// checkNightlyFlags checks every flag before anything is run or created, and
// returns the scenarios (by name) and seeds to run; the scenario files
// --scenario names are read and validated here, and kept in opts.files.
// --scenario given empty is an error, not the whole catalogue.
func checkNightlyFlags(cmd *cobra.Command, opts *nightlyOptions) ([]string, []int64, error) {
	if opts.compare != "" {
		for _, f := range []string{"seeds", "parallel", "out", "scenario", "shard", "time-scale"} {
			if cmd.Flags().Changed(f) {
				return nil, nil, fmt.Errorf("--%s is for a night's run: --compare only compares two ledgers", f)
			}
		}

		return nil, nil, nil
	}

	seeds, err := parseSeeds(opts.seeds)
	if err != nil {
		return nil, nil, err
	}

	if err := checkParallel(opts.parallel); err != nil {
		return nil, nil, err
	}

	if err := checkTimeScale(cmd, opts.timeScale); err != nil {
		return nil, nil, err
	}

	if !cmd.Flags().Changed("scenario") {
		return scenarios.Names(), seeds, nil
	}

	if len(opts.only) == 0 {
		return nil, nil, errors.New("--scenario: no scenario named (leave the flag out to run the whole catalogue)")
	}

	var names []string

	opts.files = map[string]string{}

	for _, arg := range opts.only {
		name := arg

		if !isBuiltin(arg) {
			sc, err := loadScenario(arg)

			switch {
			case err != nil && !exists(arg):
				return nil, nil, fmt.Errorf("--scenario %s: no such built-in scenario or scenario file (talchaos list)", quoteShort(arg))
			case err != nil:
				return nil, nil, fmt.Errorf("--scenario %s: %w", quoteShort(arg), err)
			}

			name = sc.Name

			// A file's results go by its name (OUT/NAME, the ledger, the
			// baseline's gate): a built-in's name would mix two
			// scenarios. (Not a file: a built-in by its file's name,
			// NAME.yaml.)
			if exists(arg) {
				if isBuiltin(name) {
					return nil, nil, fmt.Errorf("--scenario %s: its name %q is a built-in scenario's; a night's scenarios need names of their own", quoteShort(arg), name)
				}

				opts.files[name] = arg
			}
		}

		if slices.Contains(names, name) {
			return nil, nil, fmt.Errorf("--scenario %s: named twice (the scenario %q)", quoteShort(arg), name)
		}

		names = append(names, name)
	}

	return names, seeds, nil
}

// exists reports whether a file (of any kind) is at path.
func exists(path string) bool {
	_, err := os.Lstat(path)

	return err == nil
}

// source is what a night's scenario is loaded from: its file, or its
// built-in name.
func (o nightlyOptions) source(name string) string {
	if f, ok := o.files[name]; ok {
		return f
	}

	return name
}

// readBaseline reads --baseline, the previous night's ledger (nil when not
// given); a bad one is exit 2.
func readBaseline(path string) (*stats.Ledger, error) {
	if path == "" {
		return nil, nil
	}

	b, err := stats.ReadLedger(path)
	if err != nil {
		return nil, &exitError{code: exitInput, err: err}
	}

	return b, nil
}

// verdictOf prints the comparison and says how nightly exits: 1 when a
// scenario regressed significantly.
func verdictOf(out io.Writer, changes []stats.Change) error {
	var regressed, unjudged []string

	void := 0

	for _, c := range changes {
		void += c.After.Void

		switch {
		case c.Unjudged && c.After.Void > 0 && c.After.Judged() == 0:
			unjudged = append(unjudged, c.Scenario)
			fmt.Fprintf(out, "NOT JUDGED  %s: %s, no judged run tonight: nothing to compare\n", c.Scenario, reports.PassedOf(c.After))
		case c.Unjudged:
			fmt.Fprintf(out, "not compared %s: no judged run to test (%s before, %s tonight)\n", c.Scenario, reports.PassedOf(c.Before), reports.PassedOf(c.After))
		case c.Regression:
			regressed = append(regressed, c.Scenario)
			fmt.Fprintf(out, "REGRESSION  %s: %s -> %s (one-sided Fisher exact test, p = %.3g < %g)\n",
				c.Scenario, reports.PassedOf(c.Before), reports.PassedOf(c.After), c.P, nightlyAlpha)
		case c.Improvement:
			fmt.Fprintf(out, "improvement %s: %s -> %s (p = %.3g)\n", c.Scenario, reports.PassedOf(c.Before), reports.PassedOf(c.After), c.P)
		}

		// Not a regression of the rate, but of what the passes test.
		if c.After.Unstruck > c.Before.Unstruck {
			before := fmt.Sprintf("%d of %d before", c.Before.Unstruck, c.Before.Passed)
			if c.New {
				before = "not in the baseline"
			}

			fmt.Fprintf(out, "unstruck    %s: %d of %d passes had a fault that never struck (%s): they say nothing of it\n",
				c.Scenario, c.After.Unstruck, c.After.Passed, before)
		}
	}

	if void > 0 {
		fmt.Fprintf(out, "%d runs void (%s): left out of every rate\n", void, reports.VoidWhy)
	}

	switch {
	case len(regressed) > 0:
		return &exitError{code: exitFail, err: fmt.Errorf("significant regression in %s", strings.Join(regressed, ", "))}
	case len(unjudged) > 0:
		return &exitError{code: exitHarness, err: fmt.Errorf("every run of %s was void (the host stalled): the night cannot say whether it regressed; run it again on a runner that is not overloaded", strings.Join(unjudged, ", "))}
	}

	fmt.Fprintln(out, "no significant regression (one-sided Fisher exact test, alpha 0.01)")

	return nil
}
