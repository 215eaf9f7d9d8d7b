package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/judge"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/reports"
)

func newReportCmd() *cobra.Command {
	var rejudge bool

	cmd := &cobra.Command{
		Use:   "report DIR|report.json",
		Short: "Print the summary of a run's report and render its report.html, or judge it again",
		Long: `Print the summary of a run's report and render its report.html again beside it.

With --rejudge the outcome, the diagnoses and the verdict are derived again from
the run's recorded history and the expectations of the scenario copy the report
holds (neither the nodes nor the scenario file are needed), and compared with
what the run recorded. Exit code: that of the verdict (0 pass, 1 fail, 3 error:
a failure across a stall of the host); 2 when the report holds no history
(schema v1).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := reportPath(args[0])
			out := termSafe(cmd.OutOrStdout()) // what a report holds is data

			res, err := reports.ReadJSON(path)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}

			if !rejudge {
				fmt.Fprint(out, reports.Summary(res))

				page, err := reports.WriteHTML(filepath.Dir(path), res)
				if err != nil {
					return &exitError{code: exitHarness, err: err}
				}

				fmt.Fprintf(out, "\npage: %s\n", page)

				return nil
			}

			return rejudgeReport(out, path, res)
		},
	}

	cmd.Flags().BoolVar(&rejudge, "rejudge", false, "derive the outcome, diagnoses and verdict again from the recorded history")

	return cmd
}

// rejudgeReport judges a report's history again, prints the result and how it
// compares with what the run recorded.
func rejudgeReport(out io.Writer, path string, res *result.Result) error {
	if res.History == nil || res.Source == nil {
		return &exitError{code: exitInput, err: fmt.Errorf("%s: no recorded history and scenario copy to judge (a %s report?)", path, result.SchemaV1)}
	}

	sc, err := chaos.Parse(res.Source.Path, []byte(res.Source.Content))
	if err != nil {
		return &exitError{code: exitInput, err: fmt.Errorf("%s: the scenario copy it holds: %w", path, err)}
	}

	v := judge.Judge(*res.History, sc.Expect)

	again := *res
	v.Apply(&again)

	fmt.Fprint(out, reports.Summary(&again))

	same := v.Verdict == res.Verdict && reflect.DeepEqual(v.Diagnoses, res.Diagnoses) && reflect.DeepEqual(v.Checks, res.Checks)
	if same {
		fmt.Fprintf(out, "\nrejudged: the same verdict (%s), checks and diagnoses as the run recorded\n", strings.ToUpper(v.Verdict))
	} else {
		fmt.Fprintf(out, "\nrejudged: %s; the run recorded %s with %d diagnoses (this talchaos: %s; the run's: %s)\n",
			strings.ToUpper(v.Verdict), strings.ToUpper(res.Verdict), len(res.Diagnoses), buildinfo.Read(), res.Tool)
	}

	switch v.Verdict {
	case result.Pass:
		return nil
	case result.Error:
		return &exitError{code: exitHarness}
	}

	return &exitError{code: exitFail}
}

func newReplayCmd() *cobra.Command {
	opts := runOptions{}

	cmd := &cobra.Command{
		Use:   "replay DIR|report.json",
		Short: "Run a reported run again: its scenario copy, seed, target and resolved fault schedule",
		Long: `Run an earlier run again from its report: the scenario as the report holds it
(the file may have moved or changed since), the same seed and target, and every
fault with the nodes and seed the run resolved for it, started on the same
triggers. The real target needs --inventory (and --allow-destructive) again.
A new report is written, never over the one replayed.

A report is data: replay reads nothing but the report (not the scenario file it
names), and a scenario copy whose orchestrator runs a command (exec) is replayed
only with --allow-exec; the command is printed before it runs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := reportPath(args[0])
			cmd.SetOut(termSafe(cmd.OutOrStdout())) // what a report holds is data

			// Before anything is written: the new report must not replace the
			// one it replays.
			if sameDir(filepath.Dir(path), opts.reportDir) {
				return &exitError{code: exitInput, err: fmt.Errorf("--report-dir %s is where the replayed report is: the new report would overwrite it (give another --report-dir)", opts.reportDir)}
			}

			res, err := reports.ReadJSON(path)
			if err == nil {
				err = replayable(path, res)
			}

			if err != nil {
				// The contract: a report in every case, saying why.
				failed := &result.Result{Schema: result.Schema, Scenario: "replay", Target: opts.target, Replay: "talchaos replay " + path}
				if res != nil {
					failed.Scenario, failed.Seed, failed.Target = res.Scenario, res.Seed, res.Target
				}

				if derr := reports.CheckDir(opts.reportDir); derr != nil {
					return &exitError{code: exitInput, err: errors.Join(err, fmt.Errorf("--report-dir: %w", derr))}
				}

				return writeAndExit(cmd.OutOrStdout(), opts.reportDir, withError(failed, err), exitInput, err)
			}

			opts.seed, opts.target = res.Seed, res.Target
			opts.replaying, opts.replayingPath = res, path

			return runScenario(cmd, res.Scenario, opts)
		},
	}

	cmd.Flags().StringVar(&opts.reportDir, "report-dir", "talchaos-replay", "directory for the new report")
	cmd.Flags().StringVar(&opts.inventory, "inventory", "", "inventory file (when the report is of the real target)")
	cmd.Flags().BoolVar(&opts.allowDestructive, "allow-destructive", false, "permit destructive faults on real nodes")
	cmd.Flags().BoolVar(&opts.allowExec, "allow-exec", false, "run the command of a scenario copy whose orchestrator is exec (it is printed first)")
	cmd.Flags().BoolVarP(&opts.verbose, "verbose", "v", false, "also print the nodes' machined log lines")

	return cmd
}

// replayable says why a report cannot be replayed: it must hold the scenario
// copy it was run from (a v1 report names a file instead, which replay does
// not read: a report is data).
func replayable(path string, r *result.Result) error {
	if r.Source == nil {
		return fmt.Errorf("%s: holds no scenario copy (schema %s), and replay reads nothing but the report: run the scenario again with 'talchaos run FILE --seed %d'",
			path, r.Schema, r.Seed)
	}

	return nil
}

// sameDir reports whether two paths name one existing directory.
func sameDir(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}

	sb, err := os.Stat(b)
	if err != nil {
		return false
	}

	return os.SameFile(sa, sb)
}

func reportPath(arg string) string {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return filepath.Join(arg, reports.JSONFile)
	}

	return arg
}
