//go:build unix

package engine

import (
	"os/exec"
	"syscall"
)

// detach runs cmd in its own process group, so that the terminal's
// Ctrl-C, which bottlefile handles itself (letting running actions
// finish), does not kill the ssh connections those actions use.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
