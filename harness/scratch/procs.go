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

	for range killPasses {
		n, err := killPass(want, &killed)
		if err != nil {
			errs = append(errs, err)
		}

		if n == 0 || err != nil {
			break
		}
	}

	return killed, errors.Join(errs...)
}

// killPass scans /proc once and returns how many processes it killed.
func killPass(want [][]byte, killed *[]int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}

	uid := uint32(os.Getuid()) //nolint:gosec // uids fit
	me := os.Getpid()
	n := 0

	var errs []error

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == me || !ownedBy("/proc/"+e.Name(), uid, fs.ModeDir) {
			continue
		}

		ok, err := killIfTagged(pid, want)
		if err != nil {
			errs = append(errs, err)
		}

		if ok {
			n++

			if !slices.Contains(*killed, pid) {
				*killed = append(*killed, pid)
			}
		}
	}

	return n, errors.Join(errs...)
}

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
