// Command talchaos reproduces the ways a Talos control plane fails to form, on
// demand, and checks that a bootstrap procedure survives them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/result"
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	os.Exit(execute(ctx, os.Args[1:]))
}

// execute runs the CLI and returns the process exit code.
func execute(ctx context.Context, args []string) int {
	root := newRoot()
	root.SetArgs(args)

	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitPass
	}

	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "talchaos:", result.ScrubKeyMaterial(ee.err.Error()))
		}

		return ee.code
	}

	// cobra's own errors: unknown command or flag, wrong arguments.
	fmt.Fprintln(os.Stderr, "talchaos:", result.ScrubKeyMaterial(err.Error()))

	return exitInput
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "talchaos",
		Short:         "Reproduce Talos control-plane bootstrap failures on demand",
		Long:          "talchaos runs bootstrap scenarios against simulated Talos nodes (real embedded etcd, a fake Talos API speaking the real protocol) and checks them against their expectations.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}

	root.AddCommand(newRunCmd(), newListCmd(), newFaultsCmd(), newUpCmd(), newDoctorCmd(), newReportCmd(), newReplayCmd(), newHuntCmd())

	return root
}
