// Package atomicfile is the one way bottlefile replaces a file: the new
// content goes to a temporary file beside it, which is synced, renamed
// over the old one, and the directory synced, so a crash or power loss
// leaves the old file or the new one, never half of one, and a rename that
// returned is on disk. It imports no bottlefile package, so every writer
// (state, drivers, the gateway, operations, commands) can use it.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc replaces path with what write writes, with mode perm. The
// temporary file has perm before the first byte is written, so a secret is
// never readable more widely than its final file. When write fails,
// path is left as it was.
func WriteFunc(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	SyncDir(dir)
	return nil
}

// SyncDir makes a rename or link in dir durable. Filesystems that cannot
// sync a directory are not an error: the rename happened; only its
// durability is what the filesystem gives.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
