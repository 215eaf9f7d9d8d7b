// Package inputfile reads the files talchaos is given — scenarios, reports,
// ledgers, inventories, talosconfigs, machine configs — as untrusted input:
// regular files only, of a bounded size, opened so that nothing blocks.
//
// Hand-rolled because the standard library's os.ReadFile blocks forever in
// open(2) on a FIFO with no writer (and SIGTERM cannot interrupt a goroutine
// stuck there), reads a character device such as /dev/zero until memory runs
// out, and has no size limit. Here the file is opened with O_NONBLOCK (which
// makes open return at once on a FIFO and has no effect on a regular file),
// checked with fstat on the very descriptor that is then read (no window
// between a check and the open), and read through a limit.
package inputfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Limits for the kinds of files talchaos reads.
const (
	// MaxReportBytes bounds report.json and hunt.json: a long run with
	// verbose logs stays well under it.
	MaxReportBytes = 256 << 20
	// MaxLedgerBytes bounds a ledger: a summary per scenario.
	MaxLedgerBytes = 64 << 20
	// MaxConfigBytes bounds a scenario, inventory, talosconfig or machine
	// config (strictyaml.MaxFileBytes is the same).
	MaxConfigBytes = 8 << 20
)

// NotRegularError is returned for a path that is not a regular file (a
// directory, a FIFO, a socket, a device).
type NotRegularError struct {
	Path string
	Mode os.FileMode
}

func (e *NotRegularError) Error() string { return e.Path + " " + e.Problem() }

// Problem says what is wrong without the path.
func (e *NotRegularError) Problem() string {
	if e.Mode.IsDir() {
		return "is a directory"
	}

	return "is not a regular file (" + describeType(e.Mode) + ")"
}

func describeType(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}

	return "mode " + m.Type().String()
}

// TooLargeError is returned for a file over the limit.
type TooLargeError struct {
	Path  string
	Size  int64 // what was seen: the file's size, or limit+1 when it grew
	Limit int64
}

func (e *TooLargeError) Error() string { return e.Path + " " + e.Problem() }

// Problem says what is wrong without the path.
func (e *TooLargeError) Problem() string {
	return fmt.Sprintf("is %d bytes or more: at most %d", e.Size, e.Limit)
}

// Read reads the regular file at path, of at most limit bytes. Errors name
// the path: *fs.PathError for what open and read report, *NotRegularError,
// *TooLargeError.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck

	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}

	if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}

	if fi.Size() > limit {
		return nil, &TooLargeError{Path: path, Size: fi.Size(), Limit: limit}
	}

	// A file in /proc says its size is 0 and may be longer; one being written
	// may grow: the limit holds for what is read, not what fstat said.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}

	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Size: limit + 1, Limit: limit}
	}

	return data, nil
}

// Problem is what is wrong with reading a file, without its path, for a
// message that names the file its own way ("--baseline: ...").
func Problem(err error) string {
	var (
		pe *os.PathError
		nr *NotRegularError
		tl *TooLargeError
	)

	switch {
	case errors.As(err, &nr):
		return nr.Problem()
	case errors.As(err, &tl):
		return tl.Problem()
	case errors.As(err, &pe):
		return pe.Op + ": " + pe.Err.Error()
	}

	return err.Error()
}
