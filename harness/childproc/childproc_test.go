package childproc

import (
	"errors"
	"os/exec"
	"testing"
)

// A child's exit code reads as a shell reports it; what is not an exit
// has none.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   int
		isExit bool
	}{
		{"its own code", exec.Command("/bin/sh", "-c", "exit 3").Run(), 3, true},
		{"killed", exec.Command("/bin/sh", "-c", "kill -9 $$").Run(), 137, true},
		{"a clean end", exec.Command("/bin/sh", "-c", "exit 0").Run(), 0, false},
		{"never started", exec.Command("/nonexistent/talchaos-test").Run(), 0, false},
		{"another error", errors.New("wait: interrupted"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, ok := ExitCode(tc.err); code != tc.code || ok != tc.isExit {
				t.Errorf("ExitCode(%v) = %d, %t; want %d, %t", tc.err, code, ok, tc.code, tc.isExit)
			}
		})
	}
}
