package scratch

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// killPasses bounds the rescans of /proc: a process that forked while a pass
// went by is found by the next one.
const killPasses = 5

// killRuns SIGKILLs every process of this user whose environment carries one of
// the run ids, and returns their pids.
func killRuns(runs map[string]bool) ([]int, error) {
	want := make([][]byte, 0, len(runs))
	for id := range runs {
		want = append(want, []byte(EnvVar+"="+id))
	}

	var (
		killed []int
		errs   []error
	)

	deadline := time.Now().Add(execWait)

	for pass := 0; ; pass++ {
		n, waiting, err := killPass(want, &killed)
		if err != nil {
			errs = append(errs, err)

			break
		}

		switch {
		case n > 0 && pass < killPasses:
		case waiting && time.Now().Before(deadline):
			time.Sleep(5 * time.Millisecond)
		default:
			return killed, errors.Join(errs...)
		}
	}

	return killed, errors.Join(errs...)
}

// killPass scans /proc once and returns how many processes it killed, and
// whether one was in the middle of an exec.
func killPass(want [][]byte, killed *[]int) (int, bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false, err
	}

	uid := uint32(os.Getuid()) //nolint:gosec // uids fit
	me := os.Getpid()
	n := 0
	waiting := false

	var errs []error

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == me || !ownedBy("/proc/"+e.Name(), uid, fs.ModeDir) {
			continue
		}

		ok, err := killIfTagged(pid, want)

		switch {
		case errors.Is(err, errUnsettled):
			waiting = true
		case err != nil:
			errs = append(errs, err)
		}

		if ok {
			n++

			if !slices.Contains(*killed, pid) {
				*killed = append(*killed, pid)
			}
		}
	}

	return n, waiting, errors.Join(errs...)
}

// errUnsettled: the process was in the middle of an exec; look again.
var errUnsettled = errors.New("in the middle of an exec")

// killIfTagged kills pid if its environment holds one of the wanted entries.
// The process handle is taken before the environment is read: on Linux it is a
// pidfd, so if the pid was reused in between the signal goes to the process
// that was checked (already gone), never to the newcomer.
func killIfTagged(pid int, want [][]byte) (bool, error) {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false, nil //nolint:nilerr // gone
	}
	defer p.Release() //nolint:errcheck

	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err == nil && unsettled(pid, environ) {
		return false, errUnsettled
	}

	if err != nil || !tagged(environ, want) {
		return false, nil //nolint:nilerr // gone, a zombie (empty environ) or not readable: not provably ours
	}

	if err := p.Signal(syscall.SIGKILL); err != nil {
		if errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) {
			return false, nil
		}

		return false, fmt.Errorf("kill %d: %w", pid, err)
	}

	return true, nil
}

// execWait bounds how long killRuns rescans for processes in the middle of
// an exec (unsettled). A variable for the test.
var execWait = 2 * time.Second

// unsettled reports whether an empty environment was read from a process in
// the middle of execve: the kernel answers empty until the new image's stack
// is set up (fs/proc/base.go environ_read: mm->env_end still 0), so a run's
// child that had just forked and was starting its program when the run was
// killed would be passed over. Any user process, neither a zombie nor a
// kernel thread, with an empty environment is taken as one.
func unsettled(pid int, environ []byte) bool {
	if len(environ) > 0 {
		return false
	}

	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")

	return err == nil && !zombie(stat) && !kernelThread(stat)
}

// pfKthread is PF_KTHREAD in a /proc/PID/stat line's flags (field 9).
const pfKthread = 0x00200000

// kernelThread reports whether a /proc/PID/stat line is a kernel thread's
// (they have no environment, ever).
func kernelThread(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}

	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 7 {
		return false
	}

	flags, err := strconv.ParseUint(string(fields[6]), 10, 64)

	return err == nil && flags&pfKthread != 0
}

// tagged reports whether a NUL-separated environment holds one of the wanted
// entries exactly.
func tagged(environ []byte, want [][]byte) bool {
	for entry := range bytes.SplitSeq(environ, []byte{0}) {
		for _, w := range want {
			if bytes.Equal(entry, w) {
				return true
			}
		}
	}

	return false
}
