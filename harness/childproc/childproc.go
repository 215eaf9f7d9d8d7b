// Package childproc starts the programs talchaos runs as children (the exec
// orchestrator's command, the simulated control plane's kube-apiserver) so
// that they die with talchaos: each leads its own process group, is killed
// by the kernel when talchaos dies (Pdeathsig), and carries the run's
// TALCHAOS_RUN_ID, by which the run's watchdog, or else the next run, finds
// what a SIGKILLed one left (package scratch).
package childproc

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
)

// Prepare sets cmd up as a child that dies with talchaos: its own process
// group, and Pdeathsig. A command made with exec.CommandContext has its
// whole group killed when the context ends. The caller adds scratch.Env()
// to its environment.
func Prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	if cmd.Cancel != nil {
		cmd.Cancel = func() error { return KillGroup(cmd.Process.Pid) }
	}
}

// StartLocked starts cmd and waits for it on one locked OS thread. Pdeathsig
// fires when the thread that forked the child exits, not the process, and Go
// retires idle threads: the forking thread must live until the child has been
// waited for. started gets Start's error; waited, if it started, Wait's.
func StartLocked(cmd *exec.Cmd) (started, waited <-chan error) {
	s, w := make(chan error, 1), make(chan error, 1)

	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()

		if err := cmd.Start(); err != nil {
			s <- err

			return
		}

		s <- nil
		w <- cmd.Wait()
	}()

	return s, w
}

// KillGroup SIGKILLs the process group led by pid; an empty group is not an error.
func KillGroup(pid int) error { return SignalGroup(pid, syscall.SIGKILL) }

// SignalGroup sends sig to the process group led by pid; an empty group is
// not an error.
func SignalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}

	return err
}

// ExitCode is the exit code a shell reports for a child that ended with err
// (what cmd.Wait returned): its own, or 128 plus the number of the signal
// that ended it. ok is false when err is not an exit: nil, or a child that
// did not start or could not be waited for.
func ExitCode(err error) (code int, ok bool) {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return 0, false
	}

	if st, ok := exit.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal()), true
	}

	return exit.ExitCode(), true
}
