package scratch

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays both parts: a run (watchedEnv set: it starts its
// watchdog, says so, and waits; told "stop" on stdin, it stops the watchdog
// and exits), and that run's watchdog (WatchdogEnv set), whose reap writes
// the file reapedEnv names.
const (
	watchedEnv = "SCRATCH_TEST_WATCHED"
	reapedEnv  = "SCRATCH_TEST_REAPED"
)

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(WatchdogEnv); ok {
		err := ServeWatchdog(spec, os.Stdin, func() {
			os.WriteFile(os.Getenv(reapedEnv), []byte("reaped"), 0o600) //nolint:errcheck
		})
		if err != nil {
			os.Exit(3)
		}

		os.Exit(0)
	}

	if _, ok := os.LookupEnv(watchedEnv); ok {
		wd, err := StartWatchdog("/proc/self/exe")
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n") //nolint:errcheck
			os.Exit(3)
		}

		os.Stdout.WriteString("watching\n") //nolint:errcheck

		if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); line == "stop\n" { //nolint:errcheck
			wd.Stop()
			os.Exit(0)
		}

		time.Sleep(time.Hour)
	}

	os.Exit(m.Run())
}

// A run that ends by itself stops its watchdog, which reaps nothing; a run
// that is SIGKILLed has its watchdog reap at once.
func TestWatchdog(t *testing.T) {
	for _, tc := range []struct {
		name       string
		end        func(run *exec.Cmd, stdin *os.File)
		wantReaped bool
	}{
		{"run stops it", func(_ *exec.Cmd, stdin *os.File) { stdin.WriteString("stop\n") }, false}, //nolint:errcheck
		{"run SIGKILLed", func(run *exec.Cmd, _ *os.File) { run.Process.Kill() }, true},            //nolint:errcheck
	} {
		t.Run(tc.name, func(t *testing.T) {
			reaped := filepath.Join(t.TempDir(), "reaped")

			inR, inW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer inW.Close() //nolint:errcheck

			run := exec.Command("/proc/self/exe")
			run.Env = append(os.Environ(), watchedEnv+"=1", reapedEnv+"="+reaped)
			run.Stdin = inR

			out, err := run.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}

			if err := run.Start(); err != nil {
				t.Fatal(err)
			}

			inR.Close() //nolint:errcheck

			if line, _ := bufio.NewReader(out).ReadString('\n'); line != "watching\n" { //nolint:errcheck
				run.Process.Kill() //nolint:errcheck
				t.Fatalf("the run said %q", line)
			}

			watchdog := childWith(t, run.Process.Pid, WatchdogEnv)

			tc.end(run, inW)
			run.Wait() //nolint:errcheck

			for deadline := time.Now().Add(30 * time.Second); Alive(watchdog); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					syscall.Kill(watchdog, syscall.SIGKILL) //nolint:errcheck
					t.Fatalf("the watchdog %d still runs 30 s after its run ended", watchdog)
				}
			}

			if _, err := os.Stat(reaped); (err == nil) != tc.wantReaped {
				t.Errorf("reaped: %v, want %v", err == nil, tc.wantReaped)
			}
		})
	}
}

// childWith finds the process whose environment names pid in the variable.
func childWith(t *testing.T, pid int, env string) int {
	t.Helper()

	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		entries, _ := os.ReadDir("/proc") //nolint:errcheck

		for _, e := range entries {
			environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil {
				continue
			}

			for _, v := range strings.Split(string(environ), "\x00") {
				if strings.HasPrefix(v, env+"="+strconv.Itoa(pid)+":") {
					if n, err := strconv.Atoi(e.Name()); err == nil {
						return n
					}
				}
			}
		}
	}

	t.Fatalf("no process with %s=%d:…", env, pid)

	return 0
}

// A zombie (exited, not yet waited for) is not alive, and is gone.
func TestAliveSaysNoToAZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	pid := cmd.Process.Pid
	start, err := startTime(pid)

	for deadline := time.Now().Add(10 * time.Second); err == nil && Alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("true still runs after 10 s")
		}
	}

	if err == nil && !gone(pid, start) {
		t.Error("a zombie is not gone")
	}

	if _, serr := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); serr != nil {
		t.Error("the zombie was reaped before it was looked at")
	}

	cmd.Wait() //nolint:errcheck

	if Alive(pid) || !gone(pid, start) {
		t.Error("a process waited for is alive")
	}

	if !Alive(os.Getpid()) || gone(os.Getpid(), selfStart(t)) {
		t.Error("this process is not alive")
	}
}

func TestParseWatchdogSpec(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		pid   int
		start uint64
		ok    bool
	}{
		{"1234:5678", 1234, 5678, true},
		{"1234", 0, 0, false},
		{"1:5678", 0, 0, false},
		{"1234:0", 0, 0, false},
		{"x:1", 0, 0, false},
		{"", 0, 0, false},
	} {
		pid, start, err := parseWatchdogSpec(tc.spec)
		if (err == nil) != tc.ok || pid != tc.pid || start != tc.start {
			t.Errorf("parseWatchdogSpec(%q) = %d, %d, %v", tc.spec, pid, start, err)
		}
	}
}

func selfStart(t *testing.T) uint64 {
	t.Helper()

	s, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}

	return s
}
