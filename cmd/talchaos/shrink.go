package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/harness/seedpool"
	"github.com/talchaos/talchaos/harness/shrink"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/stats"
)

// shrinkReport is REPORT-DIR/shrink.json.
type shrinkReport struct {
	Scenario string `json:"scenario"`
	// Outcome is what every reduction had to keep reproducing.
	Outcome string  `json:"outcome"`
	Rate    float64 `json:"rate"`
	Seeds   []int64 `json:"seeds"`
	// File is the minimal scenario, next to this report.
	File string `json:"file"`
	*shrink.Result
}

// runShrink hunts the scenario over the seeds, takes its commonest failing
// outcome (or its commonest outcome when no seed failed: a catalogue
// scenario's expectations describe the failure) and shrinks the scenario
// while the outcome reproduces at --rate.
func runShrink(cmd *cobra.Command, arg string, opts huntOptions) error {
	out := cmd.OutOrStdout()

	if math.IsNaN(opts.rate) || opts.rate <= 0 || opts.rate > 1 {
		return &exitError{code: exitInput, err: fmt.Errorf("--rate %g: want a fraction of the seeds, 0 < R <= 1", opts.rate)}
	}

	// A shrink changes the cluster's shape and runs many candidates: a real
	// cluster has the shape its inventory gives, and hours per candidate.
	if opts.target == "real" {
		return &exitError{code: exitInput, err: errors.New("--shrink is for simulated nodes (--target sim or container): a real cluster's shape is its inventory's")}
	}

	// The hunt guards its own runs; the shrink's candidates come after it.
	defer guardRun(cmd.ErrOrStderr())()

	h, err := runHunt(cmd, arg, opts)
	if h == nil {
		return err
	}

	// A hunt that failed, or whose only trouble was void runs, has outcomes
	// to shrink.
	if ee := (*exitError)(nil); errors.As(err, &ee) && ee.code != exitFail && !errors.As(err, new(voidRunsError)) {
		return err
	}

	keep := outcomeToShrink(h.Summary)
	if keep == nil {
		return &exitError{code: exitHarness, err: fmt.Errorf("nothing to shrink: every seed's run was voided by a stall of the host (%d of %d): run the hunt again", h.Summary.Void, h.Summary.Runs)}
	}

	seeds, _ := parseSeeds(opts.seeds) // runHunt checked them
	if got := float64(len(keep.Seeds)) / float64(h.Summary.Judged()); got < opts.rate {
		return &exitError{code: exitFail, err: fmt.Errorf("nothing to shrink: the commonest outcome, %q, came on %d of %d judged seeds (%.2f), under --rate %g", keep.Key(), len(keep.Seeds), h.Summary.Judged(), got, opts.rate)}
	}

	sc, err := loadScenarioAt(arg, opts.timeScale)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	tgt, err := targetFor(opts.runOptions)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	fmt.Fprintf(out, "\nshrinking %s: each reduction must still end in %q on %.0f%% of seeds %s\n", sc.Name, keep.Key(), opts.rate*100, opts.seeds)

	started := time.Now()

	res, err := shrink.Shrink(cmd.Context(), sc.Source, shrink.Options{
		File: sc.File, Rate: opts.rate, Parse: chaos.Parse,
		Test: func(ctx context.Context, sc *scenario.Scenario) (float64, error) {
			return reproduction(ctx, sc, tgt, seeds, opts, keep.Key())
		},
		OnStep: func(s shrink.Step) {
			verdict := "kept"
			if !s.Kept {
				verdict = "needed"
			}

			fmt.Fprintf(out, "  %-6s %-60s reproduced on %.0f%%\n", verdict, s.What, s.Rate*100)
		},
	})
	if err != nil {
		return &exitError{code: exitHarness, err: err}
	}

	file := sc.Name + ".shrunk.yaml"
	header := fmt.Sprintf("# Shrunk by 'talchaos hunt %s --shrink --rate %g --seeds %s' from %s:\n# it still ends in %q on at least %.0f%% of those seeds.\n",
		arg, opts.rate, opts.seeds, sc.File, keep.Key(), opts.rate*100)

	if err := scratch.WriteFileAtomic(filepath.Join(opts.reportDir, file), append([]byte(header), res.File...), 0o644); err != nil {
		return &exitError{code: exitHarness, err: err}
	}

	data, err := json.MarshalIndent(shrinkReport{Scenario: sc.Name, Outcome: keep.Key(), Rate: opts.rate, Seeds: seeds, File: file, Result: res}, "", "  ")
	if err == nil {
		err = scratch.WriteFileAtomic(filepath.Join(opts.reportDir, "shrink.json"), append(data, '\n'), 0o644)
	}

	if err != nil {
		return &exitError{code: exitHarness, err: err}
	}

	kept := res.Kept()
	fmt.Fprintf(out, "\n%d of %d reductions kept in %s", len(kept), len(res.Steps), reports.Millis(time.Since(started).Milliseconds()))

	switch {
	case res.Interrupted:
		fmt.Fprint(out, " (interrupted: the smallest scenario so far)")
	case res.Exhausted:
		fmt.Fprint(out, " (stopped at the limit of tries)")
	}

	fmt.Fprintln(out, ":")

	for _, s := range kept {
		fmt.Fprintf(out, "  - %s\n", s.What)
	}

	fmt.Fprintf(out, "minimal scenario: %s (reproduce: talchaos hunt %s --seeds %s)\n",
		filepath.Join(opts.reportDir, file), filepath.Join(opts.reportDir, file), opts.seeds)

	if res.Interrupted {
		return &exitError{code: exitHarness, err: interruptedRun(cmd.Context(), cmd.Context().Err())}
	}

	return nil
}

// outcomeToShrink is the commonest failing outcome of a hunt, or its
// commonest outcome when no seed failed; never a run voided by a stall of the
// host, which is no outcome of the cluster's (nil when every run was void).
func outcomeToShrink(s stats.Summary) *stats.Outcome {
	var keep *stats.Outcome

	for i, o := range s.Outcomes {
		switch {
		case o.Verdict == stats.Void:
		case keep == nil || keep.Verdict == stats.Pass && o.Verdict != stats.Pass:
			keep = &s.Outcomes[i]
		}
	}

	return keep
}

// reproduction runs a candidate over the seeds, opts.parallel at a time, and
// returns the fraction of the judged ones (not voided by a stall of the host)
// that ended in the outcome `want`; every seed voided is an error. It stops as
// soon as so many missed that the rate cannot be reached (the seeds not run
// count as missed). A candidate the target refuses is shrink.ErrInvalid.
func reproduction(parent context.Context, sc *scenario.Scenario, tgt target.Target, seeds []int64, opts huntOptions, want string) (float64, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	// allowed is how many seeds may miss the outcome while the rate can
	// still be met over the judged ones: a run voided by a stall of the host
	// is neither a hit nor a miss, and leaves fewer to judge.
	allowed := func(judged int) int { return judged - int(math.Ceil(opts.rate*float64(judged)-1e-9)) }

	var (
		mu                  sync.Mutex
		hits, misses, voids int
		failure             error
	)

	weight := func(int64) int { return slots(sc, tgt) }

	seedpool.RunWeighted(ctx, seeds, opts.parallel, weight, func(seed int64) bool {
		res, err := harness.Run(ctx, sc, harness.Options{
			Target: tgt, Seed: seed, AllowDestructive: opts.allowDestructive, Replay: "(a shrink candidate)",
		})

		mu.Lock()
		defer mu.Unlock()

		switch {
		case err != nil && harness.IsInputError(err):
			failure = fmt.Errorf("%w: %s", shrink.ErrInvalid, err)

			cancel()
		case ctx.Err() != nil:
			// Stopped: by the caller, or because the rate is out of reach.
		case res.Voided:
			voids++

			if misses > allowed(len(seeds)-voids) {
				cancel()
			}
		default:
			key := stats.Outcome{Verdict: huntVerdict(res), Diagnoses: diagnosisCodes(res)}.Key()
			if key == want {
				hits++
			} else if misses++; misses > allowed(len(seeds)-voids) {
				cancel()
			}
		}

		return true
	})

	switch {
	case parent.Err() != nil:
		return 0, parent.Err()
	case failure != nil:
		return 0, failure
	case voids == len(seeds):
		return 0, fmt.Errorf("every seed's run of a candidate was voided by a stall of the host (its report's voided): nothing was judged")
	}

	return float64(hits) / float64(len(seeds)-voids), nil
}

// shrinkFlagsHelp is the part of hunt's help about --shrink.
var shrinkFlagsHelp = strings.TrimSpace(`
With --shrink, the hunt is followed by a search for a smaller scenario with the
same outcome (its commonest failing one, or its commonest one when every seed
passed): faults are dropped (delta debugging), then per-node settings, config
patches, workers, control planes and workload, and fault delays and windows are
shortened, each kept only if the smaller scenario still ends in that outcome on
at least --rate of the seeds. Writes REPORT-DIR/NAME.shrunk.yaml (the original's
text and comments, less what was removed) and shrink.json (every step tried).`)
