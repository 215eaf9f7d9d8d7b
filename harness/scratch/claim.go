package scratch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A Claim is a directory outside os.TempDir() that talchaos writes files into
// and removes them from on exit (`talchaos up --dir`): they hold a cluster's
// keys. A SIGKILLed up cannot remove them, so the directory carries a claim
// marker (ClaimFile: the owner and the files written, each added before it is
// written) and a marked temp dir records where the claim is; a reap of that
// temp dir (its owner provably dead) removes the claimed files too, and so
// does the next Claim of the same directory. Only the files the marker lists
// are removed, and only when they are regular files directly in the
// directory; the directory itself only when the claim created it and it is
// then empty.

// ClaimFile is the claim marker inside a claimed directory.
const ClaimFile = ".talchaos-claim"

// claimRecord is the claim marker's content.
type claimRecord struct {
	Owner Owner `json:"owner"`
	// Created is the topmost directory the claim made (the directory itself
	// or one of its parents; "" when the directory existed): from the
	// directory up to it, each is removed when empty.
	Created string   `json:"created"`
	Files   []string `json:"files"`
}

// Claim is a claimed directory; see Claim.
type Claim struct {
	dir    string
	record claimRecord
	// pointer is the marked temp dir that records the claim for Reap.
	pointer string
}

// pointerFile names, in a marked temp dir, the claimed directory.
const pointerFile = "claimed-dir"

// ErrClaimedByLiveRun is returned by ClaimDir for a directory a running
// talchaos process has claimed.
var ErrClaimedByLiveRun = errors.New("claimed by a running talchaos")

// ClaimDir claims dir (absolute or relative; created if missing, mode 0700).
// A claim left by a dead run is reaped first; one held by a live process is
// refused (ErrClaimedByLiveRun, with its pid).
func ClaimDir(dir string) (*Claim, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}

	if _, err := ReapClaim(abs); err != nil {
		return nil, err
	}

	created, err := firstMissing(abs)
	if err != nil {
		return nil, err
	}

	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}

	owner, _ := self() //nolint:errcheck // an unidentified owner is recorded, never reaped

	c := &Claim{dir: abs, record: claimRecord{Owner: owner, Created: created, Files: []string{}}}

	if err := c.save(); err != nil {
		return nil, err
	}

	pointer, err := MkdirTemp(Prefix + "claim-")
	if err != nil {
		c.Release()

		return nil, err
	}

	c.pointer = pointer

	if err := WriteSecret(filepath.Join(pointer, pointerFile), []byte(abs)); err != nil {
		c.Release()

		return nil, err
	}

	return c, nil
}

// Dir is the claimed directory, absolute.
func (c *Claim) Dir() string { return c.dir }

// Write writes a new file (0600, never overwriting one) into the directory,
// listed in the marker before it is created.
func (c *Claim) Write(name string, data []byte) error {
	if name == "" || strings.ContainsAny(name, `/\`) || name == ClaimFile || name == "." || name == ".." {
		return fmt.Errorf("scratch: %q is not a file name", name)
	}

	path := filepath.Join(c.dir, name)

	if _, err := os.Lstat(path); err == nil {
		return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	}

	c.record.Files = append(c.record.Files, name)
	if err := c.save(); err != nil {
		return err
	}

	return WriteSecret(path, data)
}

// Release removes the files written, the marker, the directory when the
// claim created it and it is empty, and the temp dir recording the claim.
func (c *Claim) Release() {
	removeClaimed(c.dir, c.record) //nolint:errcheck

	if c.pointer != "" {
		os.RemoveAll(c.pointer) //nolint:errcheck
	}
}

func (c *Claim) save() error {
	data, err := json.Marshal(c.record)
	if err != nil {
		return err
	}

	tmp, err := os.CreateTemp(c.dir, ClaimFile+".tmp-*")
	if err != nil {
		return err
	}

	if _, err := tmp.Write(data); err != nil {
		tmp.Close()           //nolint:errcheck
		os.Remove(tmp.Name()) //nolint:errcheck

		return err
	}

	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name()) //nolint:errcheck

		return err
	}

	return os.Rename(tmp.Name(), filepath.Join(c.dir, ClaimFile))
}

// ReapClaim removes what a dead run's claim left in dir. It returns the
// files removed; ErrClaimedByLiveRun when the claim's owner may be running;
// nothing when dir holds no claim. A marker that is not this user's, not a
// regular file or not a complete claim is left alone and refused: nothing
// proves what wrote it.
func ReapClaim(dir string) ([]string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}

	marker := filepath.Join(dir, ClaimFile)

	if _, err := os.Lstat(marker); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}

	rec, ok := readClaim(marker)
	if !ok {
		return nil, fmt.Errorf("%s is not a claim this talchaos can read: remove it if no talchaos uses %s", marker, dir)
	}

	me, err := self()
	if err != nil || !isDead(rec.Owner, me) {
		return nil, fmt.Errorf("%s: %w (pid %d)", dir, ErrClaimedByLiveRun, rec.Owner.PID)
	}

	return rec.Files, removeClaimed(dir, rec)
}

func readClaim(marker string) (claimRecord, bool) {
	uid := uint32(os.Getuid()) //nolint:gosec // uids fit
	if !ownedBy(marker, uid, 0) {
		return claimRecord{}, false
	}

	data, err := os.ReadFile(marker) //nolint:gosec // a regular file of this user's, checked above
	if err != nil || len(data) > 1<<20 {
		return claimRecord{}, false
	}

	var rec claimRecord

	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()

	if err := dec.Decode(&rec); err != nil {
		return claimRecord{}, false
	}

	o := rec.Owner
	if o.PID <= 0 || o.Start == 0 || o.Boot == "" || o.Host == "" || o.PIDNS == "" || !validRunID(o.Run) {
		return claimRecord{}, false
	}

	for _, f := range rec.Files {
		if f == "" || strings.ContainsAny(f, `/\`) || f == "." || f == ".." || f == ClaimFile {
			return claimRecord{}, false
		}
	}

	// Created must be the claimed directory or one of its parents.
	dir := filepath.Dir(marker)
	if c := rec.Created; c != "" && (!filepath.IsAbs(c) || (c != dir && !strings.HasPrefix(dir, strings.TrimSuffix(c, "/")+"/"))) {
		return claimRecord{}, false
	}

	return rec, true
}

// removeClaimed removes the claim's files (regular files of this user's
// only), its marker last, then the directory if the claim created it and
// nothing else is in it.
func removeClaimed(dir string, rec claimRecord) error {
	uid := uint32(os.Getuid()) //nolint:gosec // uids fit

	var errs []error

	for _, f := range rec.Files {
		path := filepath.Join(dir, f)
		if !ownedBy(path, uid, 0) {
			continue
		}

		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}

	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	if err := os.Remove(filepath.Join(dir, ClaimFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	if rec.Created == "" {
		return nil
	}

	// os.Remove removes only an empty directory: the user's files stay.
	for p := dir; ; p = filepath.Dir(p) {
		if os.Remove(p) != nil || p == rec.Created || filepath.Dir(p) == p {
			break
		}
	}

	return nil
}

// firstMissing is the topmost directory of abs's path that does not exist
// yet: what MkdirAll creates. Empty when abs exists.
func firstMissing(abs string) (string, error) {
	missing := ""

	for p := abs; ; p = filepath.Dir(p) {
		_, err := os.Lstat(p)
		if err == nil {
			return missing, nil
		}

		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}

		missing = p

		if filepath.Dir(p) == p {
			return missing, nil
		}
	}
}

// reapPointer removes the claim a dead run's temp dir records, when that
// claim is the same run's (a later run may have claimed the directory since).
func reapPointer(tempDir string, owner Owner) error {
	data, err := os.ReadFile(filepath.Join(tempDir, pointerFile)) //nolint:gosec // inside a marked dir of this user's
	if err != nil {
		return nil //nolint:nilerr // no claim recorded
	}

	dir := string(data)
	if !filepath.IsAbs(dir) {
		return nil
	}

	rec, ok := readClaim(filepath.Join(dir, ClaimFile))
	if !ok || rec.Owner.Run != owner.Run {
		return nil
	}

	return removeClaimed(dir, rec)
}
