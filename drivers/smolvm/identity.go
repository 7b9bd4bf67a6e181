package smolvm

import (
	"context"
	"os"
	"path/filepath"

	"github.com/bottlefile/bottlefile/drivers"
)

var _ drivers.EngineIdentifier = (*Driver)(nil)

// EngineID is the host and the smolvm data directory its machines live
// in (SMOLVM_DATA_DIR, else the user's ~/.local/share/smolvm): smolvm
// keeps every machine of a user on a host in one place, so two runtime
// blocks of this driver on one host see the same machines.
func (d *Driver) EngineID(context.Context) (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	dir := os.Getenv("SMOLVM_DATA_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".local", "share", "smolvm")
	}
	return "smolvm:" + host + ":" + dir, nil
}
