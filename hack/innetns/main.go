// Command innetns runs a command in a network namespace of its own (package
// sim/netns): `go run ./hack/innetns -- COMMAND [ARGS...]`. make test runs
// the scenario suite's parallel Ginkgo processes in one, so that they and
// the Ginkgo CLI reach each other on the namespace's loopback while the
// built-ins with cluster.network take their addresses there (a test binary
// would otherwise run itself again in a namespace of its own, out of the
// CLI's reach). Where no namespace can be made it runs the command as it is.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/talchaos/talchaos/sim/netns"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}

	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: innetns -- COMMAND [ARGS...]")
		os.Exit(2)
	}

	if !netns.Inside() {
		code, err := netns.Reexec(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, nil)
		if err == nil {
			os.Exit(code)
		}

		if !errors.Is(err, netns.ErrUnavailable) {
			fmt.Fprintln(os.Stderr, "innetns:", err)
			os.Exit(1)
		}

		fmt.Fprintf(os.Stderr, "innetns: %v; running %s outside one\n", err, args[0])
	} else if err := netns.Setup(); err != nil {
		fmt.Fprintln(os.Stderr, "innetns:", err)
		os.Exit(1)
	}

	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "innetns:", err)
		os.Exit(1)
	}

	if err := syscall.Exec(path, args, os.Environ()); err != nil { //nolint:gosec // the caller's own command
		fmt.Fprintln(os.Stderr, "innetns:", err)
		os.Exit(1)
	}
}
