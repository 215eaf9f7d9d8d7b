// Package scratch creates talchaos's temporary directories and removes what
// killed runs left behind.
//
// A run keeps etcd data, machine configs and CA keys in temp dirs, and the exec
// orchestrator starts the user's command. A run that is SIGKILLed (or loses
// power) cannot clean up, so every dir is created with an owner marker naming
// the process that owns it, and the run's watchdog (watchdog.go) reaps at once,
// or else the next run: it removes marked dirs under os.TempDir() whose owner
// is provably dead, and kills the processes those runs started (found by the
// TALCHAOS_RUN_ID their environment carries).
//
// It is hand-rolled because nothing off the shelf decides ownership safely:
// temp-dir cleaners go by age (which would delete the keys of a long-running
// `talchaos up`), lock files go stale with reused pids, and nothing else kills
// the orphaned grandchildren of a dead process. Here a dead owner is proven, not
// guessed: the marker records the pid together with the process start time
// (field 22 of /proc/PID/stat), the boot id, the host name and the pid
// namespace, and anything that does not match exactly is left alone. Only Linux
// has the /proc this needs; elsewhere dirs are still marked but never reaped.
package scratch

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const (
	// Prefix starts the name of every temp dir talchaos creates.
	Prefix = "talchaos-"
	// MarkerFile is the owner marker inside a temp dir.
	MarkerFile = ".talchaos-owner"
	// EnvVar names the run in the environment of every process talchaos starts.
	EnvVar = "TALCHAOS_RUN_ID"

	maxMarker = 4 << 10
)

// Owner is what a marker records about the process that created the dir.
type Owner struct {
	PID int `json:"pid"`
	// Start is field 22 of /proc/PID/stat: the process start time in clock
	// ticks after boot. A reused pid has another start time.
	Start uint64 `json:"start"`
	// Boot is /proc/sys/kernel/random/boot_id: start times count from it.
	Boot string `json:"boot"`
	// Host is the host name: a TMPDIR shared between machines is left alone.
	Host string `json:"host"`
	// PIDNS is the pid namespace (readlink /proc/self/ns/pid): an owner in
	// another namespace cannot be looked up by pid, so it is left alone.
	PIDNS string `json:"pidns"`
	// Run is the run id, also in the environment of the processes it started.
	Run string `json:"run"`
}

var (
	selfOnce sync.Once
	selfVal  Owner
	selfErr  error
)

// RunID is this process's run id: 32 random hex digits, the same for every dir
// and command of the process.
func RunID() string {
	self() //nolint:errcheck // the run id does not depend on /proc

	return selfVal.Run
}

// Env is EnvVar=RunID(), for the environment of a command talchaos starts.
func Env() string { return EnvVar + "=" + RunID() }

// self is this process's owner record. The run id is always set; the error
// says the process could not be identified (no /proc), in which case its dirs
// are marked but can never be proven dead.
func self() (Owner, error) {
	selfOnce.Do(func() {
		var b [16]byte

		rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails

		selfVal.Run = hex.EncodeToString(b[:])
		selfVal.PID = os.Getpid()

		var errs []error

		start, err := startTime(selfVal.PID)
		if err != nil {
			errs = append(errs, err)
		}

		selfVal.Start = start
		selfVal.Boot, err = readTrimmed("/proc/sys/kernel/random/boot_id")
		errs = append(errs, err)
		selfVal.PIDNS, err = os.Readlink("/proc/self/ns/pid")
		errs = append(errs, err)
		selfVal.Host, err = os.Hostname()
		errs = append(errs, err)
		selfErr = errors.Join(errs...)
	})

	return selfVal, selfErr
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)

	return string(bytes.TrimSpace(b)), err
}

// startTime reads field 22 of /proc/PID/stat.
func startTime(pid int) (uint64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}

	return parseStartTime(stat)
}

// parseStartTime takes field 22 of a /proc/PID/stat line. The command name
// (field 2) is in parentheses and may hold spaces and parentheses itself, so
// fields are counted after the last ')'.
func parseStartTime(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}

	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 {
		return 0, errors.New("malformed /proc stat: too few fields")
	}

	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("malformed /proc stat start time %q", fields[19])
	}

	return v, nil
}

// MkdirTemp creates a new directory under os.TempDir() as os.MkdirTemp does
// (mode 0700), named after pattern (which must start with Prefix), and marks
// it as this process's. The marker is written atomically: a dir is either
// unmarked (never reaped) or completely marked.
func MkdirTemp(pattern string) (string, error) {
	if !strings.HasPrefix(pattern, Prefix) || strings.ContainsAny(pattern, `/\`) {
		return "", fmt.Errorf("scratch: pattern %q must start with %q and name no directory", pattern, Prefix)
	}

	owner, _ := self() //nolint:errcheck // an unidentified owner is still recorded, never reaped

	data, err := json.Marshal(owner)
	if err != nil {
		return "", err
	}

	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}

	if err := writeMarker(dir, data); err != nil {
		os.RemoveAll(dir) //nolint:errcheck

		return "", fmt.Errorf("scratch: mark %s: %w", dir, err)
	}

	return dir, nil
}

func writeMarker(dir string, data []byte) error {
	tmp := filepath.Join(dir, MarkerFile+".tmp")

	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}

	if _, err := f.Write(data); err != nil {
		f.Close() //nolint:errcheck

		return err
	}

	if err := f.Close(); err != nil {
		return err
	}

	return os.Rename(tmp, filepath.Join(dir, MarkerFile))
}

// Reaped is what a reap removed.
type Reaped struct {
	// Dirs are the removed temp dirs.
	Dirs []string
	// Procs are the pids of the killed processes.
	Procs []int
	// Owners are the pids of the dead runs these belonged to.
	Owners []int
}

// Empty reports whether nothing was reaped.
func (r Reaped) Empty() bool { return len(r.Dirs) == 0 && len(r.Procs) == 0 }

// Reap reaps os.TempDir(); see ReapIn.
func Reap() (Reaped, error) { return ReapIn(os.TempDir()) }

// ReapIn removes what dead talchaos runs left in dir: every directory directly
// in it named Prefix*, owned by this user, whose marker names an owner that is
// provably dead, after killing the processes of this user whose environment
// carries that owner's run id. Anything else is left alone: unmarked dirs,
// unreadable or malformed markers, live owners, owners on another host or in
// another pid namespace. Errors are reported, not fatal: what could be reaped
// is.
func ReapIn(dir string) (Reaped, error) {
	var out Reaped

	me, err := self()
	if err != nil {
		return out, nil //nolint:nilerr // not identifiable here (no /proc): nothing can be proven dead
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		return out, err
	}

	var (
		errs   []error
		dead   []string
		owners = map[string]Owner{}
		runs   = map[string]bool{}
	)

	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), Prefix) || !e.IsDir() {
			continue
		}

		path := filepath.Join(dir, e.Name())

		owner, ok := readMarker(path)
		if !ok || !isDead(owner, me) {
			continue
		}

		dead = append(dead, path)
		owners[path] = owner

		if !runs[owner.Run] {
			runs[owner.Run] = true
			out.Owners = append(out.Owners, owner.PID)
		}
	}

	if len(dead) == 0 {
		return out, nil
	}

	// Processes first: they may still write into the dirs.
	procs, err := killRuns(runs)
	out.Procs = procs

	if err != nil {
		errs = append(errs, err)
	}

	for _, path := range dead {
		// A claimed directory elsewhere (up --dir) first: its record is here.
		if err := reapPointer(path, owners[path]); err != nil {
			errs = append(errs, err)

			continue
		}

		if err := removeMarked(path); err != nil {
			errs = append(errs, err)

			continue
		}

		out.Dirs = append(out.Dirs, path)
	}

	return out, errors.Join(errs...)
}

func validRunID(s string) bool {
	if len(s) != 32 {
		return false
	}

	_, err := hex.DecodeString(s)

	return err == nil
}

// readMarker reads a dir's owner marker; ok only when the dir and the marker
// are this user's (not symlinks) and the marker is complete.
func readMarker(path string) (Owner, bool) {
	uid := uint32(os.Getuid()) //nolint:gosec // uids fit

	if !ownedBy(path, uid, fs.ModeDir) {
		return Owner{}, false
	}

	marker := filepath.Join(path, MarkerFile)
	if !ownedBy(marker, uid, 0) {
		return Owner{}, false
	}

	f, err := os.Open(marker)
	if err != nil {
		return Owner{}, false
	}
	defer f.Close() //nolint:errcheck

	data := make([]byte, maxMarker+1)

	n, _ := f.Read(data) //nolint:errcheck // a short or failed read does not parse
	if n == 0 || n > maxMarker {
		return Owner{}, false
	}

	var o Owner

	dec := json.NewDecoder(bytes.NewReader(data[:n]))
	dec.DisallowUnknownFields()

	if err := dec.Decode(&o); err != nil {
		return Owner{}, false
	}

	if o.PID <= 0 || o.Start == 0 || o.Boot == "" || o.Host == "" || o.PIDNS == "" || !validRunID(o.Run) {
		return Owner{}, false
	}

	return o, true
}

// ownedBy reports whether path (not followed if a symlink) has the given type
// (fs.ModeDir, or 0 for a regular file) and belongs to uid.
func ownedBy(path string, uid uint32, typ fs.FileMode) bool {
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Type() != typ {
		return false
	}

	sys, ok := st.Sys().(*syscall.Stat_t)

	return ok && sys.Uid == uid
}

// isDead reports whether the owner is provably not running.
func isDead(o, me Owner) bool {
	switch {
	case o.Host != me.Host:
		return false // another machine sharing the dir: not ours to judge
	case o.Boot != me.Boot:
		return true // this machine rebooted since: every process of that boot is gone
	case o.PIDNS != me.PIDNS:
		return false // its pid means something else here
	case o.Run == me.Run:
		return false // this very process
	}

	// No such process, another one under its pid, or one that has exited
	// and waits for its parent to take its status.
	return gone(o.PID, o.Start)
}

// removeMarked removes a marked dir, its marker last, so that an interrupted
// removal leaves a dir the next reap still recognises.
func removeMarked(path string) error {
	entries, err := os.ReadDir(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	var errs []error

	for _, e := range entries {
		if e.Name() == MarkerFile {
			continue
		}

		if err := os.RemoveAll(filepath.Join(path, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}

	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	if err := os.Remove(filepath.Join(path, MarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	return nil
}

// WriteSecret creates a new file readable by its owner only (0600: configs
// and talosconfigs hold keys), never overwriting one.
func WriteSecret(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}

	if _, err := f.Write(data); err != nil {
		f.Close() //nolint:errcheck

		return err
	}

	return f.Close()
}
