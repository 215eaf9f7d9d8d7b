package qemu

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/talchaos/talchaos/harness/syncbuf"
)

// startQEMU starts a guestless QEMU, paused (-S), with a user netdev net0 and
// a QMP socket, and returns the socket and a channel that yields the process's
// exit. The process is killed at cleanup if still running.
func startQEMU(t *testing.T) (string, <-chan error, *syncbuf.Buffer) {
	t.Helper()

	bin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not found: install the Debian package qemu-system-x86")
	}

	sock := socketPath(t)
	stderr := &syncbuf.Buffer{}

	cmd := exec.Command(bin,
		"-machine", "none", "-display", "none", "-nodefaults",
		"-qmp", "unix:"+sock+",server=on,wait=off",
		"-netdev", "user,id=net0",
		"-S")
	cmd.Stderr = stderr

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	exited := make(chan error, 1)
	reaped := make(chan struct{})

	go func() {
		exited <- cmd.Wait()
		close(reaped)
	}()

	// The test may have taken the exit status already: wait on reaped, not exited.
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-reaped
	})

	return sock, exited, stderr
}

// openQEMU opens the socket as soon as QEMU serves it.
func openQEMU(t *testing.T, sock, nic string, stderr *syncbuf.Buffer) *Machine {
	t.Helper()

	deadline := time.Now().Add(5 * time.Second)

	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		m, err := Open(ctx, sock, nic)

		cancel()

		if err == nil {
			t.Cleanup(func() { m.Close() })

			return m
		}

		if time.Now().After(deadline) {
			t.Fatalf("QMP socket not ready: %v\nqemu stderr: %s", err, stderr)
		}

		time.Sleep(10 * time.Millisecond)
	}
}

func TestRealQEMU(t *testing.T) {
	sock, exited, stderr := startQEMU(t)
	ctx := testCtx(t)

	m := openQEMU(t, sock, "", stderr)

	wantStatus := func(running bool, status string) {
		t.Helper()

		r, s, err := m.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}

		if r != running || s != status {
			t.Fatalf("Status = %t, %q; want %t, %q", r, s, running, status)
		}
	}

	must := func(what string, err error) {
		t.Helper()

		if err != nil {
			t.Fatalf("%s: %v\nqemu stderr: %s", what, err, stderr)
		}
	}

	wantStatus(false, "prelaunch") // -S: not started yet
	must("Resume", m.Resume(ctx))
	wantStatus(true, "running")
	must("Pause", m.Pause(ctx))
	wantStatus(false, "paused")
	must("Pause again", m.Pause(ctx)) // idempotent in QEMU
	must("Reset", m.Reset(ctx))
	wantStatus(false, "prelaunch") // a reset while paused goes back to prelaunch
	must("SetLink down", m.SetLink(ctx, false))
	must("SetLink up", m.SetLink(ctx, true))
	must("Resume", m.Resume(ctx))
	must("PowerOff", m.PowerOff(ctx))
	wantStatus(false, "paused")
	must("PowerOn", m.PowerOn(ctx))
	wantStatus(true, "running")

	// QEMU greets one QMP client at a time: a second Open must give up.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if m2, err := Open(short, sock, ""); err == nil {
		m2.Close()
		t.Fatal("second QMP client got a greeting")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Open: %v, want a deadline error", err)
	}

	cancel()

	must("Close", m.Close())

	// Once the first client is gone, another can connect.
	bad := openQEMU(t, sock, "nope", stderr)

	err := bad.SetLink(ctx, false)

	var qerr *Error
	if !errors.As(err, &qerr) || qerr.Class != "DeviceNotFound" || qerr.Desc != "Device 'nope' not found" {
		t.Fatalf("SetLink on an unknown NIC: %v (%#v)", err, qerr)
	}

	if !strings.Contains(err.Error(), "Device 'nope' not found") {
		t.Fatalf("error %q lacks QEMU's desc", err)
	}

	must("Quit", bad.Quit(ctx))

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("qemu exited with %v\nstderr: %s", err, stderr)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("qemu still running 3s after quit")
	}

	must("Close after Quit", bad.Close())
}
