// Command talchaos reproduces the ways a Talos control plane fails to form, on
// demand, and checks that a bootstrap procedure survives them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/buildinfo"
	"github.com/talchaos/talchaos/harness/result"
	"github.com/talchaos/talchaos/harness/scratch"
	"github.com/talchaos/talchaos/sim"
	"github.com/talchaos/talchaos/sim/container"
	"github.com/talchaos/talchaos/sim/kubecp"
	"github.com/talchaos/talchaos/sim/netns"
)

// Exit codes (DESIGN.md).
const (
	exitPass    = 0
	exitFail    = 1
	exitInput   = 2
	exitHarness = 3
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}

	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// cleansUp are the commands that own something to stop or remove when
// interrupted (nodes, ports, temp dirs, a child command): they end on the
// cancelled context once that is done. Every other command only reads and
// prints, so a signal ends it within quickExitGrace, whatever it is doing.
var cleansUp = map[string]bool{"run": true, "replay": true, "hunt": true, "nightly": true, "certify": true, "up": true, "node": true, "node-net": true}

// quickExitGrace is how long a command with nothing to clean up has to end
// by itself after a signal.
const quickExitGrace = 500 * time.Millisecond

// nothingToClean is set once the command that runs is not in cleansUp.
var nothingToClean atomic.Bool

func main() {
	ctx, stop := notifyInterrupts(context.Background())
	stopProfile := startProfile()
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)

	stopProfile()
	stop()
	os.Exit(code)
}

// interrupted is why a command was cut short: a signal, or a closed stdout.
// It is the cause of the command's context, and what an interrupted run
// reports as its error.
type interrupted struct{ by string }

func (e *interrupted) Error() string { return "interrupted by " + e.by }

var signalNames = map[os.Signal]string{os.Interrupt: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}

// notifyInterrupts returns a context that SIGINT, SIGTERM and SIGHUP cancel,
// with an *interrupted cause naming the signal. Later signals do not end the
// process: it is stopping nodes and removing temp dirs, which a second Ctrl-C
// should not cut short (a SIGKILL leaves them to the run's watchdog).
//
// SIGPIPE is notified too, never acted on: then a write to a closed stdout
// fails with EPIPE instead of killing the process (the Go runtime's default),
// and the stdout writer turns that into an interruption. It is not ignored:
// an ignored disposition would be inherited by the exec orchestrator's
// command. A SIGPIPE from any other descriptor (a connection the chaos reset)
// means nothing.
func notifyInterrupts(parent context.Context) (context.Context, func()) {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)

	go func() {
		var first time.Time

		for s := range sigs {
			if first.IsZero() {
				cancel(&interrupted{by: signalNames[s]})
				first = time.Now()

				if nothingToClean.Load() {
					go exitAfterGrace(signalNames[s])
				}

				continue
			}

			// A Ctrl-C reaches a run in its own network namespace twice:
			// from the terminal and passed on by the talchaos above it.
			if time.Since(first) < time.Second {
				continue
			}

			fmt.Fprintf(os.Stderr, "talchaos: %s: still stopping the nodes and removing temp files\n", signalNames[s])
		}
	}()

	return ctx, func() {
		signal.Stop(sigs)
		close(sigs)
		cancel(nil)
	}
}

// exitAfterGrace ends a command with nothing to clean up that has not ended
// quickExitGrace after a signal: it may be stuck in a call that takes no
// context (a huge report being decoded or judged).
func exitAfterGrace(by string) {
	time.Sleep(quickExitGrace)
	fmt.Fprintf(os.Stderr, "talchaos: interrupted by %s\n", by)
	os.Exit(exitHarness)
}

// stdoutWriter is the commands' stdout. Once a write fails with EPIPE (the
// reader is gone: `talchaos run ... | head -1`) it interrupts the command, so
// that the run still ends with its report and its cleanup, and drops every
// later write.
type stdoutWriter struct {
	w      io.Writer
	cancel context.CancelCauseFunc
	broken atomic.Bool
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	if s.broken.Load() {
		return len(p), nil
	}

	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		s.broken.Store(true)
		s.cancel(&interrupted{by: "a closed stdout (EPIPE)"})

		return len(p), nil
	}

	return n, err
}

// interruptedRun is the error of a run that ended because the command was
// interrupted: the interruption (what the user did), with the run's own error
// when that says more than "cancelled". Any other error is returned as is.
func interruptedRun(ctx context.Context, err error) error {
	var in *interrupted
	if err == nil || ctx.Err() == nil || !errors.As(context.Cause(ctx), &in) {
		return err
	}

	if errors.Is(err, context.Canceled) {
		return in
	}

	return fmt.Errorf("%w (%w)", in, err)
}

// reapLeftovers removes what killed talchaos runs left behind (package
// scratch): their temp dirs and the processes they started. It only reads
// os.TempDir() unless there is something to remove.
func reapLeftovers(stderr io.Writer) {
	r, err := scratch.Reap()
	if !r.Empty() {
		owners := make([]string, len(r.Owners))
		for i, pid := range r.Owners {
			owners[i] = strconv.Itoa(pid)
		}

		fmt.Fprintf(stderr, "talchaos: removed %d temp dir(s) and killed %d process(es) left by killed talchaos run(s) (pid %s)\n",
			len(r.Dirs), len(r.Procs), strings.Join(owners, ", "))
	}

	if err != nil {
		fmt.Fprintln(stderr, "talchaos: cleaning up after killed runs:", err)
	}

	if labels := sim.ReapHostAddrs(); len(labels) > 0 {
		fmt.Fprintf(stderr, "talchaos: removed the loopback addresses (%s) of killed Kubernetes run(s)\n", strings.Join(labels, ", "))
	}
}

// guardRun is what a command that starts nodes does first: it reaps what
// killed runs left (reapLeftovers) and starts this run's watchdog
// (scratch.StartWatchdog), which does the same at once if this run is
// killed. It returns the function that stops the watchdog, for the end of
// the command, after its own clean-up.
func guardRun(stderr io.Writer) (stop func()) {
	reapLeftovers(stderr)

	wd, err := scratch.StartWatchdog("/proc/self/exe")
	if err != nil {
		fmt.Fprintln(stderr, "talchaos: what this run leaves if it is killed is removed by the next run only:", err)

		return func() {}
	}

	return wd.Stop
}

// The watchdog is this program again, in its own process (WatchdogEnv set),
// and in the tests' binary too, which has no main of ours: hence init.
func init() {
	if spec, ok := os.LookupEnv(scratch.WatchdogEnv); ok {
		err := scratch.ServeWatchdog(spec, os.Stdin, watchdogReap)
		if err != nil {
			os.Exit(exitHarness)
		}

		os.Exit(exitPass)
	}
}

// watchdogReap is what a killed run's watchdog removes: reapLeftovers' temp
// dirs, processes and loopback addresses, and the Docker objects of the
// container target.
func watchdogReap() {
	scratch.Reap() //nolint:errcheck // nobody to tell: the run is gone
	sim.ReapHostAddrs()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	container.ReapDead(ctx) //nolint:errcheck
}

// execute runs the CLI with its output on stdout and stderr and returns the
// process exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	ctx = withArgs(ctx, args)

	root := newRoot()
	root.SetArgs(args)
	root.SetOut(&stdoutWriter{w: stdout, cancel: cancel})
	root.SetErr(stderr)

	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitPass
	}

	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "talchaos:", termSafeString(result.ScrubKeyMaterial(ee.err.Error())))
		}

		return ee.code
	}

	// cobra's own errors: unknown command or flag, wrong arguments.
	fmt.Fprintln(stderr, "talchaos:", termSafeString(result.ScrubKeyMaterial(err.Error())))

	return exitInput
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "talchaos",
		Short:         "Reproduce Talos control-plane bootstrap failures on demand",
		Long:          "talchaos runs bootstrap scenarios against simulated Talos nodes (real embedded etcd, a fake Talos API speaking the real protocol) and checks them against their expectations.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read().String(),
	}

	root.SetVersionTemplate("{{.Version}}\n")

	var kubeDir string

	root.PersistentFlags().StringVar(&kubeDir, "kube-dir", "",
		"directory holding hyperkube and kwok for scenarios with Kubernetes (default: $"+kubecp.EnvDir+", beside talchaos, then where 'make kube' puts it)")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if !cleansUp[cmd.Name()] {
			nothingToClean.Store(true)
		}

		// Run again in a network namespace of its own (netns.go): its
		// loopback interface starts down.
		if netns.Inside() {
			if err := netns.Setup(); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "talchaos:", err)
			}
		}

		// Through the environment, so that every cluster of a hunt, and
		// the nodes talchaos runs as processes, look in the same place.
		if kubeDir != "" {
			os.Setenv(kubecp.EnvDir, kubeDir) //nolint:errcheck,gosec // a valid name
		}
	}
	root.AddCommand(newRunCmd(), newListCmd(), newShowCmd(), newFaultsCmd(), newUpCmd(), newDoctorCmd(), newReportCmd(), newReplayCmd(), newHuntCmd(), newNightlyCmd(), newCertifyCmd(), newMergeCmd(), newNodeCmd(), newNodeNetCmd(),
		&cobra.Command{
			Use:   "version",
			Short: "Print talchaos's version and the VCS revision it was built from",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Read())

				return err
			},
		})

	return root
}
