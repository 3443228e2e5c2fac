// Package atomicfile writes a file whole or not at all: a reader (or a
// restart after a crash) sees the old content or the new, never half.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data and mode perm: a temporary file in the same
// directory (named ".tmp-*", which directory watchers can skip) is written,
// synced and renamed over path, and the directory is synced so the rename
// survives a power loss where the file system allows it.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: not every file system syncs directories
		d.Close()
	}
	return nil
}
