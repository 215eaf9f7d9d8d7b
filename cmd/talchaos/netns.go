package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/talchaos/talchaos/harness/scenario"
	"github.com/talchaos/talchaos/sim/netns"
)

// argsKey holds the arguments execute runs the CLI with in its context: a
// command that needs its own network namespace runs them again inside one.
type argsKey struct{}

func withArgs(ctx context.Context, args []string) context.Context {
	return context.WithValue(ctx, argsKey{}, args)
}

// needsNetns reports whether a sim run of any of the scenarios has to be
// in a network namespace of its own (package netns): one with
// cluster.network gives its nodes the operator's addresses.
func needsNetns(targetName string, scs ...*scenario.Scenario) bool {
	if targetName != "sim" || netns.Inside() {
		return false
	}

	for _, sc := range scs {
		if sc != nil && sc.Cluster.Network != nil {
			return true
		}
	}

	return false
}

// runInNetns runs the command again in a network namespace of its own and
// ends with its exit code. When no namespace can be made, ok is false and
// the command goes on here: the sim then refuses the scenario, saying why
// (a run's report has it).
func runInNetns(cmd *cobra.Command) (ok bool, err error) {
	args, _ := cmd.Context().Value(argsKey{}).([]string) //nolint:errcheck // set by execute

	code, rerr := netns.Reexec(cmd.Context(), args, cmd.InOrStdin(), fileOf(cmd.OutOrStdout()), fileOf(cmd.ErrOrStderr()), signalOf)
	if errors.Is(rerr, netns.ErrUnavailable) {
		fmt.Fprintln(cmd.ErrOrStderr(), "talchaos:", rerr)

		return false, nil
	}

	if rerr != nil {
		return true, &exitError{code: exitHarness, err: fmt.Errorf("running in a network namespace: %w", rerr)}
	}

	if code == exitPass {
		return true, nil
	}

	return true, &exitError{code: code}
}

// fileOf is the file behind the commands' stdout writer, so that the
// command inside writes to the terminal or pipe itself (and sees a closed
// stdout itself); other writers (tests) get a copy.
func fileOf(w io.Writer) io.Writer {
	if s, ok := w.(*stdoutWriter); ok {
		if f, ok := s.w.(*os.File); ok {
			return f
		}
	}

	return w
}

// signalOf is the signal that interrupted ctx, to pass on.
func signalOf(ctx context.Context) os.Signal {
	var in *interrupted
	if errors.As(context.Cause(ctx), &in) {
		for s, name := range signalNames {
			if name == in.by {
				return s
			}
		}
	}

	return syscall.SIGTERM
}
