package scratch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A watchdog is a second talchaos process, started by a run, that does at once
// what the next run would do after the first one is SIGKILLed (or crashes):
// it reaps. Without it the temp dirs of a killed run, which hold its CA keys,
// stay until talchaos runs again, which may be never. The run holds the write
// end of a pipe that is the watchdog's stdin; the kernel closes it when the
// run dies, however it dies. A run that ends by itself says so first (one
// byte), and the watchdog just exits. testcontainers' Ryuk does the same for
// containers, over a socket; it cannot be pulled here, and it would not know
// temp dirs or loopback addresses.

// WatchdogEnv, in a process's environment, makes it the watchdog of the
// process it names: "PID:START" (START is field 22 of /proc/PID/stat).
const WatchdogEnv = "TALCHAOS_WATCHDOG"

// watchdogDone is what a run that ends by itself writes to its watchdog.
const watchdogDone = 'd'

// Watchdog is a run's handle on its watchdog process.
type Watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File
	done chan struct{}
}

// StartWatchdog starts exe (this program, which must call ServeWatchdog when
// WatchdogEnv is set) as this process's watchdog, in a process group of its
// own (a Ctrl-C to the terminal's group is not for it), with no stdout or
// stderr (the run's may be a closed pipe) and without this run's run id (the
// reap kills every process that carries it).
func StartWatchdog(exe string) (*Watchdog, error) {
	me, err := self()
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	defer r.Close() //nolint:errcheck // the child has its copy

	cmd := exec.Command(exe)
	cmd.Args = []string{fmt.Sprintf("talchaos-watchdog-of-%d", me.PID)} // what ps shows
	cmd.Stdin = r
	cmd.Env = append(withoutVars(os.Environ(), EnvVar, WatchdogEnv), fmt.Sprintf("%s=%d:%d", WatchdogEnv, me.PID, me.Start))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	if err := cmd.Start(); err != nil {
		w.Close() //nolint:errcheck

		return nil, fmt.Errorf("watchdog: %w", err)
	}

	wd := &Watchdog{cmd: cmd, pipe: w, done: make(chan struct{})}

	go func() {
		cmd.Wait() //nolint:errcheck // it exits 0, or was killed
		close(wd.done)
	}()

	return wd, nil
}

// Stop tells the watchdog the run ended by itself and waits for it to exit
// (it only exits), killing it if it does not within a few seconds.
func (w *Watchdog) Stop() {
	w.pipe.Write([]byte{watchdogDone}) //nolint:errcheck // a watchdog that is gone needs no word
	w.pipe.Close()                     //nolint:errcheck

	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		w.cmd.Process.Kill() //nolint:errcheck
		<-w.done
	}
}

// watchdogPatience bounds how long a watchdog waits for the run that closed
// its pipe to be gone: its exit is then already under way.
const watchdogPatience = time.Minute

// ServeWatchdog is the watchdog: it waits on stdin, and when the run it
// watches (spec, WatchdogEnv's value) closes it without saying it ended by
// itself, waits until the run is dead and calls reap. It ignores the
// terminal's signals.
func ServeWatchdog(spec string, stdin io.Reader, reap func()) error {
	pid, start, err := parseWatchdogSpec(spec)
	if err != nil {
		return err
	}

	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)

	var b [1]byte

	if n, _ := io.ReadFull(stdin, b[:]); n == 1 && b[0] == watchdogDone { //nolint:errcheck // EOF is the news
		return nil
	}

	for deadline := time.Now().Add(watchdogPatience); !gone(pid, start); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("watchdog: process %d closed its pipe and is still running after %s", pid, watchdogPatience)
		}
	}

	reap()

	return nil
}

func parseWatchdogSpec(spec string) (int, uint64, error) {
	p, s, ok := strings.Cut(spec, ":")
	pid, perr := strconv.Atoi(p)
	start, serr := strconv.ParseUint(s, 10, 64)

	if !ok || perr != nil || serr != nil || pid <= 1 || start == 0 {
		return 0, 0, fmt.Errorf("%s=%q: want PID:START", WatchdogEnv, spec)
	}

	return pid, start, nil
}

// gone reports whether the process pid that started at start has ended: no
// such process, another one under its pid, or a zombie (dead, not yet waited
// for by its parent).
func gone(pid int, start uint64) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}

	if err != nil {
		return false
	}

	s, err := parseStartTime(stat)

	return err == nil && (s != start || zombie(stat))
}

// Alive reports whether a process with this pid runs: it exists and is not a
// zombie. Without /proc it says yes (nothing can be proven dead).
func Alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}

	return err != nil || !zombie(stat)
}

// zombie reports whether a /proc/PID/stat line is of a process that has
// exited (state Z, or X on its way out).
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}

	return stat[i+2] == 'Z' || stat[i+2] == 'X'
}

func withoutVars(env []string, names ...string) []string {
	out := make([]string, 0, len(env))

	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}

	return out
}
