package scratch

import (
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path via a temporary file in the same
// directory: write, fsync, close, rename, then fsync the directory so the
// rename itself is durable. On failure the temporary file is removed: a
// reader (or a process restarted after a SIGKILL) sees the old file or the
// new one, never half of one.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)

	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}

	tmp := f.Name()
	closed := false

	defer func() {
		if err != nil {
			if !closed {
				_ = f.Close()
			}

			_ = os.Remove(tmp)
		}
	}()

	if _, err = f.Write(data); err != nil {
		return err
	}

	if err = f.Chmod(perm); err != nil {
		return err
	}

	if err = f.Sync(); err != nil {
		return err
	}

	closed = true
	if err = f.Close(); err != nil {
		return err
	}

	if err = os.Rename(tmp, path); err != nil {
		return err
	}

	syncDir(dir)

	return nil
}

// syncDir fsyncs a directory so a rename into it survives a crash. It is best
// effort: some filesystems and platforms do not support fsync on directories,
// and the file itself is already complete and in place.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}

	_ = d.Sync()
	_ = d.Close()
}
