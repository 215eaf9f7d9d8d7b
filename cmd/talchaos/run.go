package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness"
	"github.com/talchaos/talchaos/harness/chaos"
	"github.com/talchaos/talchaos/harness/orchestrator"
	"github.com/talchaos/talchaos/harness/real"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/harness/target"
	"github.com/talchaos/talchaos/reports"
	"github.com/talchaos/talchaos/scenarios"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/container"
)

type runOptions struct {
	// replaying is the report of the run being replayed: its scenario copy
	// and its resolved schedule are used.
	replaying     *result.Result
	replayingPath string

	target           string
	seed             int64
	reportDir        string
	verbose          bool
	inventory        string
	allowDestructive bool
	// allowExec is the consent to run the command of a replayed report's
	// exec orchestrator.
	allowExec bool
	plan      bool
	// timeScale, when set (> 0), replaces the scenario's own timeScale.
	timeScale float64
}

func newRunCmd() *cobra.Command {
	opts := runOptions{}

	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario and judge it against its expectations",
		Long: `Run a scenario file (or a built-in scenario by name, see 'talchaos list') and
write report.json, junit.xml and summary.md to the report directory.

Exit codes: 0 expectations held, 1 expectations failed, 2 bad input or usage,
3 harness or infrastructure error, or expectations that failed across a stall
of talchaos's own process of a Talos minute or more (a paused VM, a starved
host: the failure may be the host's, run it again). A report is written in
every case.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(cmd, args[0], opts)
		},
	}

	cmd.Flags().StringVar(&opts.target, "target", "sim", "where the nodes run: sim, container (one Docker container per node), or real (with --inventory)")
	cmd.Flags().StringVar(&opts.inventory, "inventory", "", "inventory file of a real cluster (--target=real)")
	cmd.Flags().BoolVar(&opts.allowDestructive, "allow-destructive", false, "permit faults that reboot, power off, isolate or wipe real nodes")
	cmd.Flags().BoolVar(&opts.plan, "plan", false, "print the resolved fault schedule and exit")
	cmd.Flags().Int64Var(&opts.seed, "seed", 1, "seed for every random choice of the run")
	cmd.Flags().StringVar(&opts.reportDir, "report-dir", "talchaos-report", "directory for report.json, junit.xml and summary.md")
	cmd.Flags().BoolVarP(&opts.verbose, "verbose", "v", false, "also print the nodes' machined log lines")
	addTimeScaleFlag(cmd, &opts.timeScale, "the scenario's timeScale")

	return cmd
}

// addTimeScaleFlag adds --time-scale to a command that runs scenarios:
// instead of what (each scenario's own timeScale).
func addTimeScaleFlag(cmd *cobra.Command, scale *float64, what string) {
	cmd.Flags().Float64Var(scale, "time-scale", 0, fmt.Sprintf("run at this time scale instead of %s (1 to %d; simulated nodes: a loaded machine wants a lower one)", what, scenario.MaxTimeScale))
}

// checkTimeScale checks --time-scale when it was given.
func checkTimeScale(cmd *cobra.Command, scale float64) error {
	if !cmd.Flags().Changed("time-scale") {
		return nil
	}

	return checkRange("--time-scale", scale, 1, scenario.MaxTimeScale)
}

// loadScenarioAt is loadScenario run at scale instead of its own timeScale
// (scale 0: its own).
func loadScenarioAt(arg string, scale float64) (*scenario.Scenario, error) {
	sc, err := loadScenario(arg)
	if err == nil && scale > 0 {
		sc.TimeScale = scale
	}

	return sc, err
}

// loadScenario reads a scenario file, or a built-in scenario by name. A bare
// name (no directory, no extension) of a built-in is the built-in, whatever
// the working directory holds: a report directory named after the scenario
// must not shadow it (./NAME is the file).
func loadScenario(arg string) (*scenario.Scenario, error) {
	if isBuiltin(arg) {
		return scenarios.Load(arg)
	}

	if _, err := os.Stat(arg); err == nil {
		return chaos.Load(arg)
	}

	if !strings.ContainsAny(arg, "/\\") {
		if data, file, err := scenarios.Read(arg); err == nil {
			return chaos.Parse(file, data)
		}
	}

	return nil, fmt.Errorf("%s: no such scenario file or built-in scenario (see 'talchaos list')", arg)
}

// isBuiltin reports whether arg is the bare name of a built-in scenario.
func isBuiltin(arg string) bool {
	return slices.Contains(scenarios.Names(), arg)
}

// replayedScenario is the scenario a report was made from: the copy it
// holds (the file may have moved or changed since; replay reads nothing but
// the report). A copy that runs a command needs the user's consent, and the
// command is shown before it runs.
func replayedScenario(out io.Writer, path string, r *result.Result, allowExec bool) (*scenario.Scenario, error) {
	if err := replayable(path, r); err != nil {
		return nil, err
	}

	sc, err := chaos.Parse(r.Source.Path, []byte(r.Source.Content))
	if err != nil {
		return nil, fmt.Errorf("%s: the scenario copy it holds: %w", path, err)
	}

	// A run given --time-scale ran its scenario at that scale (checked
	// when the report was read).
	if r.ScenarioTimeScale > 0 {
		sc.TimeScale = r.ScenarioTimeScale
	}

	if sc.Orchestrator.Name != "exec" {
		return sc, nil
	}

	command := quoteCommand(sc.Orchestrator.Command)
	if !allowExec {
		return nil, fmt.Errorf("%s: its scenario copy runs a command on this machine (orchestrator exec): %s; replay runs it only with --allow-exec", path, command)
	}

	fmt.Fprintf(out, "talchaos: replaying with --allow-exec: the report's exec orchestrator will run %s\n", command)

	return sc, nil
}

// quoteCommand shows a command's arguments Go-quoted, so that what a report
// holds reaches the terminal as text, control characters escaped.
func quoteCommand(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}

	return "[" + strings.Join(q, " ") + "]"
}

func recordedSchedule(r *result.Result) []result.Planned {
	if r == nil {
		return nil
	}

	return r.Schedule
}

// replayCommand is the command that runs the same scenario, target and seed
// again, with the inventory and the permission a real target needs.
func replayCommand(arg string, opts runOptions, seed int64) string {
	cmd := fmt.Sprintf("talchaos run %s --target %s --seed %d", shellQuote(arg), opts.target, seed)

	if opts.inventory != "" {
		cmd += " --inventory " + shellQuote(opts.inventory)
	}

	if opts.allowDestructive {
		cmd += " --allow-destructive"
	}

	if opts.timeScale > 0 {
		cmd += fmt.Sprintf(" --time-scale %g", opts.timeScale)
	}

	return cmd
}

// targetFor builds the target of a run. A real target's inventory is loaded
// and checked here, before anything starts: its problems are bad input (exit
// 2), each naming file, line and field.
func targetFor(opts runOptions) (target.Target, error) {
	switch opts.target {
	case "sim":
		if opts.inventory != "" {
			return nil, errors.New("--inventory is for --target=real")
		}

		return sim.Target{}, nil
	case "container":
		if opts.inventory != "" {
			return nil, errors.New("--inventory is for --target=real")
		}

		return container.Target{}, nil
	case "real":
		if opts.inventory == "" {
			return nil, errors.New("--target=real needs --inventory FILE")
		}

		inv, err := real.LoadInventory(opts.inventory)
		if err != nil {
			return nil, &harness.InputError{Err: err}
		}

		return &real.Target{Inventory: inv}, nil
	}

	return nil, fmt.Errorf("unknown target %q: sim, container or real", opts.target)
}

func runScenario(cmd *cobra.Command, arg string, opts runOptions) error {
	out := cmd.OutOrStdout()

	res := &result.Result{Schema: result.Schema, Scenario: strings.TrimSuffix(filepath.Base(arg), ".yaml"), Target: opts.target, Seed: opts.seed}
	res.Replay = replayCommand(arg, opts, opts.seed)

	if opts.replaying != nil {
		res.Replay = "talchaos replay " + opts.replayingPath
	}

	// Where the report goes is checked before anything else: a verdict
	// nobody can read is lost.
	if !opts.plan {
		if err := reports.CheckDir(opts.reportDir); err != nil {
			return &exitError{code: exitInput, err: fmt.Errorf("--report-dir: %w", err)}
		}
	}

	var (
		sc  *scenario.Scenario
		err error
	)

	err = checkTimeScale(cmd, opts.timeScale)

	switch {
	case err != nil:
	case opts.replaying != nil:
		sc, err = replayedScenario(out, opts.replayingPath, opts.replaying, opts.allowExec)
	default:
		sc, err = loadScenario(arg)
	}

	if err == nil && opts.timeScale > 0 {
		sc.TimeScale = opts.timeScale
	}

	if err == nil {
		res.Scenario, res.Talos = sc.Name, sc.Talos
	}

	var tgt target.Target
	if err == nil {
		tgt, err = targetFor(opts)
	}

	// The run checks it again in its plan; here it keeps a scenario the
	// target cannot run from even announcing itself.
	if err == nil {
		if cerr := tgt.Check(sc); cerr != nil {
			err = &harness.InputError{Err: cerr}
		}
	}

	if err == nil && opts.plan {
		return printPlan(out, sc, tgt, opts)
	}

	if err != nil {
		return writeAndExit(out, opts.reportDir, withError(res, err), exitInput, err)
	}

	if needsNetns(tgt.Name(), sc) {
		if ok, err := runInNetns(cmd); ok {
			return err
		}
	}

	defer guardRun(cmd.ErrOrStderr())()

	fmt.Fprintf(out, "talchaos: running %s on %s (seed %d, talos %s, %s)\n", sc.Name, tgt.Name(), opts.seed, sc.Talos, harness.ScaleNote(sc, tgt))

	res, err = harness.Run(cmd.Context(), sc, harness.Options{
		Target:           tgt,
		Seed:             opts.seed,
		Replay:           res.Replay,
		OnEvent:          reports.Progress(out, opts.verbose),
		AllowDestructive: opts.allowDestructive,
		Recorded:         recordedSchedule(opts.replaying),
	})

	if ierr := interruptedRun(cmd.Context(), err); ierr != err { //nolint:errorlint // identity: was it replaced
		err = ierr
		res.Error = err.Error()
	}

	code := exitPass

	switch {
	case err != nil && harness.IsInputError(err):
		code = exitInput
	case err != nil, res.Verdict == result.Error:
		// An error verdict without an error: the judge voided a failure
		// that came across a stall of the host (judge.Judge).
		code = exitHarness
	case res.Verdict == result.Fail:
		code = exitFail
	}

	return writeAndExit(out, opts.reportDir, res, code, err)
}

// printPlan resolves the fault schedule (the seed's choices included), checks
// it against the target as a run would, and prints it with the time scale and
// the destructive remedies the orchestrator may take.
func printPlan(out io.Writer, sc *scenario.Scenario, tgt target.Target, opts runOptions) error {
	planned, err := chaos.Plan(sc, tgt, chaos.PlanOptions{Seed: opts.seed, AllowDestructive: opts.allowDestructive})
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}

	fmt.Fprintf(out, "plan for %s on %s, seed %d, talos %s, %s; times are Talos time:\n",
		sc.Name, tgt.Name(), opts.seed, sc.Talos, harness.ScaleNote(sc, tgt))

	if len(planned) == 0 {
		fmt.Fprintln(out, "  no faults")
	}

	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)

	for _, p := range planned {
		note := ""
		if p.Kind.Destructive() {
			note = "  (destructive)"
		}

		fmt.Fprintf(w, "  %s\t%s\t%s\t%s%s\n", p.Spec.Name, p.Spec.Kind, p.Node(), p.Trigger(), note)
	}

	w.Flush() //nolint:errcheck

	orch, err := orchestrator.New(sc.Orchestrator)
	if err != nil {
		return &exitError{code: exitInput, err: sc.Errorf("orchestrator.name", "%s", err)}
	}

	fmt.Fprintf(out, "\norchestrator %s", orch.Name())

	rem, ok := orch.(orchestrator.Remedial)
	if !ok || len(rem.Remedies()) == 0 {
		fmt.Fprintln(out, ": no destructive remedies")

		return nil
	}

	permission := "it may take them (the nodes are disposable)"
	if !tgt.Disposable() {
		permission = "it reports them and stops (pass --allow-destructive to let it act)"
		if opts.allowDestructive {
			permission = "it may take them (--allow-destructive)"
		}
	}

	fmt.Fprintf(out, "; destructive remedies it may need — %s:\n", permission)

	for _, r := range rem.Remedies() {
		fmt.Fprintf(out, "  - when %s:\n      %s\n      $ %s\n", r.When, r.Action, r.Command)
	}

	return nil
}

func withError(res *result.Result, err error) *result.Result {
	res.Verdict = result.Error
	res.Error = err.Error()

	return res
}

// writeAndExit writes the reports, prints the summary and where the report is,
// and returns the exit code.
func writeAndExit(out io.Writer, dir string, res *result.Result, code int, runErr error) error {
	paths, werr := reports.Write(dir, res)

	fmt.Fprintln(out)
	fmt.Fprint(out, reports.Summary(res))

	if werr != nil {
		return &exitError{code: exitHarness, err: errors.Join(runErr, fmt.Errorf("writing the report: %w", werr))}
	}

	fmt.Fprintf(out, "\nverdict: %s\nreport: %s\n", strings.ToUpper(res.Verdict), paths[0])

	if len(paths) == 4 {
		fmt.Fprintf(out, "page:   %s\n", paths[3])
	}

	if code == exitPass {
		return nil
	}

	return &exitError{code: code, err: runErr}
}
