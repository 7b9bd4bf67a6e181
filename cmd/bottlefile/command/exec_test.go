package command

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestExec: the command's exit code is bottlefile's; standard input is
// passed on without a terminal; no command runs /bin/sh; a workload that
// is not running, or a gateway, is refused.
func TestExec(t *testing.T) {
	w := newWorkspace(t)
	w.write(strings.Replace(logsConfig, "%s", "600", 1))
	w.must("apply", "-auto-approve")
	w.fake.ExecFn = func(req drivers.ExecRequest) (int, error) {
		in, _ := io.ReadAll(req.Stdin)
		io.WriteString(req.Stdout, strings.Join(req.Command, " ")+": "+string(in))
		return 3, nil
	}
	code, out, errs := w.run("exec", "agent.coder", "--", "cat", "-")
	if code != 3 || out != "cat -: " || errs != "" {
		t.Errorf("exec: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	req := w.fake.ExecRequests[0]
	if req.TTY || req.Stdin == nil {
		t.Errorf("exec without a terminal: TTY %v, stdin %v", req.TTY, req.Stdin)
	}
	if code, out, _ := w.run("exec", "agent.coder"); code != 3 || out != "/bin/sh: " {
		t.Errorf("exec without a command: exit %d, %q", code, out)
	}
	if got := w.fake.ExecRequests[1].Command; !slices.Equal(got, []string{"/bin/sh"}) {
		t.Errorf("exec without a command ran %q", got)
	}

	if code, _, errs := w.run("exec", "agent.coder.network"); code != 1 || !strings.Contains(errs, "not the address of an agent or a sidecar") {
		t.Errorf("exec in a network: exit %d %s", code, errs)
	}
	w.fake.Exit(w.lineage(), "agent.coder", 0)
	if code, _, errs := w.run("exec", "agent.coder", "--", "true"); code != 1 || !strings.Contains(errs, "agent.coder is not running (exited with code 0)") {
		t.Errorf("exec in an exited agent: exit %d %s", code, errs)
	}
}
