package inputfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()

	regular := filepath.Join(dir, "report.json")
	if err := os.WriteFile(regular, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}

	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, 101), 0o600); err != nil {
		t.Fatal(err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(dir, "sock")

	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck

	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, path string
		want       string // substring of the error; "" for success
	}{
		{"regular", regular, ""},
		{"too large", big, "is 101 bytes or more: at most 100"},
		{"fifo", fifo, "is not a regular file (a named pipe)"},
		{"symlink to a fifo", link, "is not a regular file (a named pipe)"},
		{"socket", sock, "no such device or address"},
		{"directory", dir, "is a directory"},
		{"character device", "/dev/zero", "is not a regular file (a character device)"},
		{"missing", filepath.Join(dir, "missing"), "no such file or directory"},
		{"proc file over the limit", "/proc/self/maps", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)

			go func() {
				_, err := Read(tc.path, 100)
				done <- err
			}()

			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Read(%s) blocked", tc.path)
			}

			if tc.name == "proc file over the limit" {
				var tl *TooLargeError
				if !errors.As(err, &tl) {
					t.Fatalf("want a TooLargeError, got %v", err)
				}

				return
			}

			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Read: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Read: %v, want an error with %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.path):
				t.Fatalf("Read: %v does not name %s", err, tc.path)
			}
		})
	}
}
