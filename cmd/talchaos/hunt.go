package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/reports"
)

type huntOptions struct {
	runOptions
	seeds string
}

func newHuntCmd() *cobra.Command {
	opts := huntOptions{}

	cmd := &cobra.Command{
		Use:   "hunt SCENARIO --seeds FROM-TO",
		Short: "Run a scenario over many seeds and measure how often its expectations hold",
		Long: `Run a scenario once per seed and report the rate at which its expectations held,
with the seeds that failed (each one reproducible with 'talchaos run ... --seed N').
Reports go to REPORT-DIR/seed-N. Exit code 0 when every seed passed, 1 otherwise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runHunt(cmd, args[0], opts) },
	}

	cmd.Flags().StringVar(&opts.seeds, "seeds", "1-10", "seeds to run: FROM-TO or a comma-separated list")
	cmd.Flags().StringVar(&opts.target, "target", "sim", "where the nodes run: sim, container (one Docker container per node), or real (with --inventory)")
	cmd.Flags().StringVar(&opts.inventory, "inventory", "", "inventory file of a real cluster (--target=real)")
	cmd.Flags().BoolVar(&opts.allowDestructive, "allow-destructive", false, "permit destructive faults on real nodes")
	cmd.Flags().StringVar(&opts.reportDir, "report-dir", "talchaos-hunt", "directory for the per-seed reports")

	return cmd
}

func parseSeeds(s string) ([]int64, error) {
	if from, to, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.ParseInt(from, 10, 64)
		b, err2 := strconv.ParseInt(to, 10, 64)

		if err1 != nil || err2 != nil || a > b || b-a > 10000 {
			return nil, fmt.Errorf("--seeds %q: want FROM-TO with FROM <= TO", s)
		}

		var out []int64
		for i := a; i <= b; i++ {
			out = append(out, i)
		}

		return out, nil
	}

	var out []int64

	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %w", s, err)
		}

		out = append(out, v)
	}

	return out, nil
}

func runHunt(cmd *cobra.Command, arg string, opts huntOptions) error {
	out := cmd.OutOrStdout()

	seeds, err := parseSeeds(opts.seeds)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if err := reports.CheckDir(opts.reportDir); err != nil {
		return &exitError{code: exitInput, err: fmt.Errorf("--report-dir: %w", err)}
	}

	sc, err := loadScenario(arg)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	tgt, err := targetFor(opts.runOptions)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	reapLeftovers(cmd.ErrOrStderr())

	var (
		failed []string
		stop   error // the interruption that ended the hunt
	)

	passed := 0

	for _, seed := range seeds {
		if err := cmd.Context().Err(); err != nil {
			stop = interruptedRun(cmd.Context(), err)

			break
		}

		res, err := harness.Run(cmd.Context(), sc, harness.Options{
			Target: tgt, Seed: seed, AllowDestructive: opts.allowDestructive,
			Replay: replayCommand(arg, opts.runOptions, seed),
		})
		if err != nil && harness.IsInputError(err) {
			return &exitError{code: exitInput, err: err}
		}

		if ierr := interruptedRun(cmd.Context(), err); ierr != err { //nolint:errorlint // identity: was it replaced
			stop = ierr
			res.Error = ierr.Error()
		}

		dir := filepath.Join(opts.reportDir, fmt.Sprintf("seed-%d", seed))
		if _, werr := reports.Write(dir, res); werr != nil {
			return &exitError{code: exitHarness, err: werr}
		}

		line := fmt.Sprintf("seed %-4d %-5s %6.1fs", seed, strings.ToUpper(res.Verdict), float64(res.DurationMs)/1000)
		if stop != nil {
			// An interrupted seed is neither a pass nor a failure.
			fmt.Fprintln(out, line+"  "+res.Error)

			break
		}

		if res.Verdict == result.Pass {
			passed++
		} else {
			failed = append(failed, strconv.FormatInt(seed, 10))
			line += "  " + firstFailure(res)
		}

		fmt.Fprintln(out, line)
	}

	ran := passed + len(failed)
	if ran == 0 {
		if stop == nil {
			stop = errors.New("interrupted")
		}

		return &exitError{code: exitHarness, err: fmt.Errorf("%w before the first seed finished", stop)}
	}

	fmt.Fprintf(out, "\n%s: expectations held for %d of %d seeds (%.0f%%); reports in %s\n", sc.Name, passed, ran, 100*float64(passed)/float64(ran), opts.reportDir)

	if len(failed) > 0 {
		first, _ := strconv.ParseInt(failed[0], 10, 64) //nolint:errcheck // formatted from an int64 above
		fmt.Fprintf(out, "failing seeds: %s\nreproduce: %s\n", strings.Join(failed, " "), replayCommand(arg, opts.runOptions, first))
	}

	if stop != nil {
		return &exitError{code: exitHarness, err: stop}
	}

	if len(failed) > 0 {
		return &exitError{code: exitFail}
	}

	return nil
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
