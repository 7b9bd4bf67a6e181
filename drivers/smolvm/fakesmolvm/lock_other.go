//go:build !unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// lockDir takes an exclusive lock by creating the lock file, waiting
// while another invocation holds it.
func lockDir(path string) (unlock func(), err error) {
	path += ".excl"
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
