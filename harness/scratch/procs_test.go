package scratch

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A process with no environment is taken for one in the middle of an exec
// (the reap looks again, for execWait at the most, and leaves it); a kernel
// thread and a zombie never are.
func TestUnsettled(t *testing.T) {
	kthreadd := []byte("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 6 0 0")
	user := []byte("9 (a (b) c) S 1 9 9 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 6 0 0")

	if !kernelThread(kthreadd) || kernelThread(user) || kernelThread([]byte("garbage")) {
		t.Error("kernelThread misreads a stat line")
	}

	// Other packages' tests reap while this one runs: they would wait for
	// the bare process too, so it lives a short while.
	defer func(w time.Duration) { execWait = w }(execWait)
	execWait = 200 * time.Millisecond

	bare := exec.Command("sleep", "60")
	bare.Env = []string{}

	if err := bare.Start(); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { bare.Process.Kill(); bare.Wait() }) //nolint:errcheck

	// sleep's own image is set up once its stat shows it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(bare.Process.Pid) + "/comm"); string(comm) == "sleep\n" {
			break
		}

		if time.Now().After(deadline) {
			t.Fatal("sleep did not start")
		}
	}

	environ, err := os.ReadFile("/proc/" + strconv.Itoa(bare.Process.Pid) + "/environ")
	if err != nil || len(environ) != 0 || !unsettled(bare.Process.Pid, environ) {
		t.Errorf("a process without environment (%q, %v) is not unsettled", environ, err)
	}

	if mine, _ := os.ReadFile("/proc/self/environ"); unsettled(os.Getpid(), mine) {
		t.Error("this process is unsettled")
	}

	start := time.Now()

	killed, err := killRuns(map[string]bool{"no-such-run": true})
	if err != nil || len(killed) != 0 {
		t.Errorf("killRuns = %v, %v; want nothing killed", killed, err)
	}

	if waited := time.Since(start); waited < execWait {
		t.Errorf("killRuns looked again for %v, want %v for the unsettled process", waited, execWait)
	}

	bare.Process.Kill() //nolint:errcheck
}
