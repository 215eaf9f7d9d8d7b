package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/shard"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/reports/merge"
	"github.com/talchaos/talchaos/reports/stats"
)

type mergeOptions struct {
	out      string
	baseline string
}

func newMergeCmd() *cobra.Command {
	opts := mergeOptions{}

	cmd := &cobra.Command{
		Use:   "merge SHARD_DIR... [--out DIR] [--baseline FILE]",
		Short: "Combine the directories of a sharded nightly, hunt or certify into what one unsharded run writes",
		Long: `merge reads the directories the N shards of one run wrote (talchaos nightly, hunt
or certify with --shard K/N, run on N machines) and writes into --out what the run
unsharded writes: for a night ledger.json, junit.xml, summary.md, index.html and
each scenario's hunt (OUT/NAME/hunt.json, junit.xml, summary.md); for a hunt
hunt.json, junit.xml and summary.md; for a certification certify.json, junit.xml,
summary.md and index.html. The runs' own reports stay in the shard directories:
the merged files point at them by relative paths, so publish --out and the shard
directories together.

Every file is read as untrusted input (regular files, size limits, strict JSON).
merge refuses, with exit code 2 and the file and what is wrong, a directory that is
not a shard's, shards of different talchaos builds, of different seeds or scenario
sets or shard counts, a shard given twice or missing, and a shard without every run
its stamp gives it (an interrupted shard).

With --baseline (the previous night's ledger.json) the merged night is compared as
nightly compares it: exit code 1 on a significant regression (one-sided Fisher
exact test, alpha 0.01). Otherwise the exit code is the unsharded command's: a hunt
1 when a seed failed, a certification 1 when a run's outcome is in its --fail-on.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: exitInput, err: errors.New("merge needs the shard directories: talchaos merge SHARD_DIR... --out DIR")}
			}

			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runMerge(cmd, args, opts) },
	}

	cmd.Flags().StringVar(&opts.out, "out", "talchaos-merged", "directory for the merged files")
	cmd.Flags().StringVar(&opts.baseline, "baseline", "", "for a night: the previous night's ledger.json to compare the merged ledger with")

	return cmd
}

func runMerge(cmd *cobra.Command, dirs []string, opts mergeOptions) error {
	out := termSafe(cmd.OutOrStdout())

	baseline, err := readBaseline(opts.baseline)
	if err != nil {
		return err
	}

	m, err := merge.Read(dirs, opts.out)
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	if baseline != nil && m.Kind != merge.Nightly {
		return &exitError{code: exitInput, err: fmt.Errorf("--baseline is for a night's shards: these are a %s's", m.Kind)}
	}

	if why := stats.Comparable(baseline, m.Ledger); why != "" {
		return &exitError{code: exitInput, err: fmt.Errorf("--baseline %s: %s", opts.baseline, why)}
	}

	// Created only once every input is known to be good.
	if err := reports.CheckDir(opts.out); err != nil {
		return &exitError{code: exitInput, err: fmt.Errorf("--out: %w", err)}
	}

	fmt.Fprintf(out, "merged %d shards of a %s: %d scenario(s) x seeds %s\n", m.Shards, m.Kind, len(m.Scenarios), shard.Ranges(m.Seeds))

	switch m.Kind {
	case merge.Hunt:
		if _, err := reports.WriteHunt(opts.out, m.Hunt); err != nil {
			return &exitError{code: exitHarness, err: err}
		}

		printHunt(out, m.Hunt)
		fmt.Fprintf(out, "hunt.json, junit.xml and summary.md in %s\n", opts.out)

		return huntVerdictOf(m.Hunt)
	case merge.Certify:
		if err := reports.WriteCertify(opts.out, m.Certify); err != nil {
			return &exitError{code: exitHarness, err: err}
		}

		fmt.Fprintf(out, "\n%s", reports.CertifySummary(m.Certify))
		fmt.Fprintf(out, "\ncertify.json, junit.xml, summary.md and index.html in %s\n", opts.out)

		return certifyVerdictOf(m.Certify)
	}

	return writeMergedNight(out, m, baseline, opts.out)
}

// writeMergedNight writes a merged night as nightly writes one, each
// scenario's hunt in DIR/NAME, and gates it.
func writeMergedNight(out io.Writer, m *merge.Merged, baseline *stats.Ledger, dir string) error {
	for _, h := range m.Hunts {
		sub := filepath.Join(dir, h.Scenario)
		if err := reports.CheckDir(sub); err != nil {
			return &exitError{code: exitHarness, err: err}
		}

		if _, err := reports.WriteHunt(sub, h); err != nil {
			return &exitError{code: exitHarness, err: err}
		}
	}

	runs := 0
	for _, h := range m.Hunts {
		runs += len(h.Runs)
	}

	return writeNight(out, dir, m.Ledger, m.Hunts, baseline, fmt.Sprintf("nightly: %d run(s) of %d scenario(s)", runs, len(m.Hunts)))
}
