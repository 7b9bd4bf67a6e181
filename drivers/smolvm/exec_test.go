package smolvm

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestExec: machine exec --name (no -n), the guest's exit code passed
// through, stdin forwarded with -i only when given, output streamed; a
// stopped machine is smolvm's own refusal.
func TestExec(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	lineage := newLineage()
	ctx := context.Background()
	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: planOne(t, d, agentSpec("coder", "alpine:3")), Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	resp, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil || len(resp.Objects) != 1 {
		t.Fatalf("Read: %v %+v", err, resp.Objects)
	}
	obj := resp.Objects[0]
	run := func(stdin string, cmd ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		req := drivers.ExecRequest{Command: cmd, Stdout: &out, Stderr: &errb}
		if stdin != "" {
			req.Stdin = strings.NewReader(stdin)
		}
		code, err := d.Exec(ctx, lineage, obj, req)
		if err != nil {
			t.Fatalf("Exec %q: %v", cmd, err)
		}
		return code, out.String(), errb.String()
	}

	f.resetCalls(t)
	if code, out, _ := run("", "sh", "-c", "echo hi; exit 3"); code != 3 || out != "hi\n" {
		t.Errorf("sh -c 'echo hi; exit 3': exit %d, output %q", code, out)
	}
	if code, out, _ := run("piped in\n", "cat"); code != 0 || out != "piped in\n" {
		t.Errorf("cat with stdin: exit %d, output %q", code, out)
	}
	want := [][]string{
		{"machine", "exec", "--name", obj.ID, "--stream", "--", "sh", "-c", "echo hi; exit 3"},
		{"machine", "exec", "--name", obj.ID, "-i", "--stream", "--", "cat"},
	}
	if got := f.calls(t); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}

	if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, Object: drivers.Object{Addr: obj.Addr, Kind: obj.Kind}, ID: obj.ID}); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run("", "true"); code != 1 || !strings.Contains(errs, "Error:") {
		t.Errorf("exec in a deleted machine: exit %d, stderr %q", code, errs)
	}
}
