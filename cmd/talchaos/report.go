package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/reports"
)

func newReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR|report.json",
		Short: "Print the summary of a run's report",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := reportPath(args[0])

			res, err := reports.ReadJSON(path)
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}

			fmt.Fprint(cmd.OutOrStdout(), reports.Summary(res))

			return nil
		},
	}
}

func newReplayCmd() *cobra.Command {
	opts := runOptions{}

	cmd := &cobra.Command{
		Use:   "replay DIR|report.json",
		Short: "Run a reported scenario again with the same seed and target",
		Long:  "Run the scenario of an earlier report again, with its seed and target (the real target needs --inventory again), writing a new report.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := reports.ReadJSON(reportPath(args[0]))
			if err != nil {
				return &exitError{code: exitInput, err: err}
			}

			scenarioArg := res.File
			if scenarioArg == "" || (strings.HasPrefix(scenarioArg, "scenarios/") && !fileExists(scenarioArg)) {
				scenarioArg = res.Scenario // a built-in
			}

			opts.seed, opts.target = res.Seed, res.Target

			return runScenario(cmd, scenarioArg, opts)
		},
	}

	cmd.Flags().StringVar(&opts.reportDir, "report-dir", "talchaos-replay", "directory for the new report")
	cmd.Flags().StringVar(&opts.inventory, "inventory", "", "inventory file (when the report is of the real target)")
	cmd.Flags().BoolVar(&opts.allowDestructive, "allow-destructive", false, "permit destructive faults on real nodes")
	cmd.Flags().BoolVarP(&opts.verbose, "verbose", "v", false, "also print the nodes' machined log lines")

	return cmd
}

func reportPath(arg string) string {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return filepath.Join(arg, reports.JSONFile)
	}

	return arg
}

func fileExists(p string) bool {
	_, err := os.Stat(p)

	return err == nil
}
