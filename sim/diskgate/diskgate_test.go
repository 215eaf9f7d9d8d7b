package diskgate_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/talchaos/talchaos/sim/diskgate"
)

func syncTook(t *testing.T, path string, data bool) time.Duration {
	t.Helper()

	took, err := timeSync(path, data)
	if err != nil {
		t.Fatal(err)
	}

	return took
}

// timeSync appends a byte to path and times its fsync or fdatasync.
func timeSync(path string, data bool) (time.Duration, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}

	defer f.Close()

	if _, err := f.WriteString("x"); err != nil {
		return 0, err
	}

	start := time.Now()

	if data {
		err = syscall.Fdatasync(int(f.Fd()))
	} else {
		err = f.Sync()
	}

	return time.Since(start), err
}

func TestSlowDelaysSyncsUnderTheDirectoryOnly(t *testing.T) {
	if err := diskgate.Available(); err != nil {
		t.Skip(err)
	}

	slow, fast := t.TempDir(), t.TempDir()

	if err := os.MkdirAll(filepath.Join(slow, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}

	const latency = 300 * time.Millisecond

	release, err := diskgate.Slow(slow, latency)
	if err != nil {
		t.Fatal(err)
	}

	wal := filepath.Join(slow, "member", "wal", "0.wal")

	if took := syncTook(t, wal, true); took < latency {
		t.Errorf("fdatasync under the slowed directory took %s, want at least %s", took, latency)
	}

	if took := syncTook(t, wal, false); took < latency {
		t.Errorf("fsync under the slowed directory took %s, want at least %s", took, latency)
	}

	if took := syncTook(t, filepath.Join(fast, "f"), true); took >= latency {
		t.Errorf("fdatasync elsewhere took %s, want less than %s", took, latency)
	}

	// A sync waiting when the gate is released runs at once.
	done := make(chan time.Duration, 1)

	go func() {
		took, err := timeSync(wal, true)
		if err != nil {
			t.Error(err)
		}

		done <- took
	}()

	time.Sleep(50 * time.Millisecond)
	release()

	if took := <-done; took >= latency {
		t.Errorf("a sync waiting at release took %s, want less than %s", took, latency)
	}

	if took := syncTook(t, wal, true); took >= latency {
		t.Errorf("fdatasync after release took %s, want less than %s", took, latency)
	}
}
