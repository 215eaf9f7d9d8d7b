package scratch

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeClaim leaves a claim as a run of owner would have: its marker and the
// files it lists.
func writeClaim(t *testing.T, dir string, rec claimRecord) {
	t.Helper()

	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}

	for _, f := range rec.Files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("key"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(filepath.Join(dir, ClaimFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestClaimWritesAndReleases(t *testing.T) {
	tmp := privateTmp(t)
	me(t)

	parent := t.TempDir()
	dir := filepath.Join(parent, "new", "lab")

	c, err := ClaimDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	for _, f := range []string{"talosconfig", "cp1.yaml"} {
		if err := c.Write(f, []byte("key")); err != nil {
			t.Fatal(err)
		}
	}

	if err := c.Write("talosconfig", nil); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second write of one file: %v, want it refused", err)
	}

	for _, bad := range []string{"../escape", "", ClaimFile, ".."} {
		if err := c.Write(bad, nil); err == nil {
			t.Fatalf("Write(%q) was allowed", bad)
		}
	}

	if m, _ := filepath.Glob(filepath.Join(tmp, Prefix+"claim-*", pointerFile)); len(m) != 1 { //nolint:errcheck
		t.Fatalf("the claim is not recorded in the temp dir: %v", m)
	}

	// Another claim of the same directory by a live run (this one) is refused.
	if _, err := ClaimDir(dir); !errors.Is(err, ErrClaimedByLiveRun) {
		t.Fatalf("a second claim: %v, want ErrClaimedByLiveRun", err)
	}

	c.Release()

	if _, err := os.Lstat(filepath.Join(parent, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directories the claim made are still there: %v", err)
	}

	if m, _ := filepath.Glob(filepath.Join(tmp, Prefix+"*")); len(m) != 0 { //nolint:errcheck
		t.Fatalf("the temp dir recording the claim is left: %v", m)
	}
}

// What a SIGKILLed run's claim left is removed by the next claim of the
// directory and by a reap of the temp dirs, and nothing else: the user's
// files, a claim of a live run, a marker that lists paths outside the
// directory or is not a claim.
func TestClaimLeftByADeadRunIsReaped(t *testing.T) {
	tmp := privateTmp(t)
	dead := deadOwner(t)

	t.Run("by the next claim", func(t *testing.T) {
		dir := t.TempDir()
		writeClaim(t, dir, claimRecord{Owner: dead, Files: []string{"talosconfig", "cp1.yaml"}})

		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}

		c, err := ClaimDir(dir)
		if err != nil {
			t.Fatal(err)
		}

		for _, f := range []string{"talosconfig", "cp1.yaml"} {
			if _, err := os.Lstat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s of the dead claim is still there", f)
			}
		}

		c.Release()

		entries, _ := os.ReadDir(dir) //nolint:errcheck
		if len(entries) != 1 || entries[0].Name() != "notes.txt" {
			t.Fatalf("%s holds %v, want only the user's notes.txt", dir, entries)
		}
	})

	t.Run("by a reap of the temp dirs", func(t *testing.T) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "lab")
		writeClaim(t, dir, claimRecord{Owner: dead, Created: dir, Files: []string{"talosconfig"}})

		pointer := markedDir(t, tmp, Prefix+"claim-dead", dead)
		if err := os.WriteFile(filepath.Join(pointer, pointerFile), []byte(dir), 0o600); err != nil {
			t.Fatal(err)
		}

		if _, err := ReapIn(tmp); err != nil {
			t.Fatal(err)
		}

		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the dead claim's directory is still there: %v", err)
		}
	})

	for _, tc := range []struct {
		name   string
		marker string
	}{
		{"a path outside", `{"owner":OWNER,"created":"","files":["../outside"]}`},
		{"created not a parent", `{"owner":OWNER,"created":"/elsewhere","files":[]}`},
		{"unknown field", `{"owner":OWNER,"created":"","files":[],"extra":1}`},
		{"not JSON", `nonsense`},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "lab")

			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}

			outside := filepath.Join(parent, "outside")
			if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}

			owner, _ := json.Marshal(dead) //nolint:errcheck
			body := []byte(strings.ReplaceAll(tc.marker, "OWNER", string(owner)))

			if err := os.WriteFile(filepath.Join(dir, ClaimFile), body, 0o600); err != nil {
				t.Fatal(err)
			}

			if _, err := ClaimDir(dir); err == nil {
				t.Fatal("a claim over an unreadable marker was allowed")
			}

			if _, err := os.Stat(outside); err != nil {
				t.Fatalf("a file outside the directory was removed: %v", err)
			}
		})
	}
}
