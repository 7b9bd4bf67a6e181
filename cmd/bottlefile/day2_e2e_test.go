package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// day2Config is one bottle with a sidecar and an allowlist. The agent
// prints a line, waits for /tmp/stop, prints its last line and exits 3.
const day2Config = `
agent "ops" {
  image   = %[1]q
  command = ["sh", "-c", "echo agent-up; while [ ! -e /tmp/stop ]; do sleep 0.2; done; echo agent-last; exit 3"]
  egress {
    allow = ["example.com:443"]
  }
  sidecar "db" {
    image   = %[1]q
    command = ["sh", "-c", "echo sidecar-up; exec sleep 3600"]
  }
}
`

// TestE2EDayTwo walks the day-2 commands of issue 13 on one bottle on the
// real engine, shared by its subtests in order: exec (exit code, piped
// stdin), merged logs, status of an agent that exited with code 3, and the
// saved log read after destroy.
func TestE2EDayTwo(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, day2Config, image)
	mustRun(t, dir, "apply", "-auto-approve")
	lineageOf(t, cli, dir)

	t.Run("exec", func(t *testing.T) {
		if r := bottlefile(t, dir, "exec", "agent.ops", "--", "sh", "-c", "echo out; echo err >&2; exit 5"); r.code != 5 || r.stdout != "out\n" || r.stderr != "err\n" {
			t.Errorf("exec exit 5: %s", r)
		}
		cmd := exec.Command(binary, "-chdir="+dir, "exec", "agent.ops.sidecar.db", "--", "sh", "-c", "cat; echo done")
		cmd.Stdin = strings.NewReader("piped line\n")
		out, err := cmd.Output()
		if err != nil || string(out) != "piped line\ndone\n" {
			t.Errorf("exec with stdin piped: %v, output %q", err, out)
		}
		if r := bottlefile(t, dir, "exec", "agent.ops.gateway"); r.code != 1 || !strings.Contains(r.stderr, "not the address of an agent or a sidecar") {
			t.Errorf("exec in a gateway: %s", r)
		}
	})

	// The agent ends: its last line, then exit code 3.
	mustRun(t, dir, "exec", "agent.ops", "--", "touch", "/tmp/stop")
	var doc struct {
		Bottles []struct {
			Address   string   `json:"address"`
			Egress    []string `json:"egress"`
			Workloads []struct {
				Address  string `json:"address"`
				Role     string `json:"role"`
				State    string `json:"state"`
				ExitCode *int   `json:"exit_code"`
			} `json:"workloads"`
		} `json:"bottles"`
	}
	var r result
	for deadline := time.Now().Add(30 * time.Second); ; {
		r = mustRun(t, dir, "status", "-json")
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("status -json: %v\n%s", err, r)
		}
		if len(doc.Bottles) == 1 && len(doc.Bottles[0].Workloads) > 0 && doc.Bottles[0].Workloads[0].State == "exited" || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}

	t.Run("status", func(t *testing.T) {
		if len(doc.Bottles) != 1 {
			t.Fatalf("status -json: want one bottle\n%s", r.stdout)
		}
		b := doc.Bottles[0]
		if b.Address != "agent.ops" || len(b.Egress) != 1 || b.Egress[0] != "example.com:443" {
			t.Errorf("bottle: %s", r.stdout)
		}
		got := map[string]string{}
		for _, w := range b.Workloads {
			got[w.Address] = w.Role + " " + w.State
			if w.Address == "agent.ops" && (w.ExitCode == nil || *w.ExitCode != 3) {
				t.Errorf("agent.ops: exit code %v, want 3\n%s", w.ExitCode, r.stdout)
			}
		}
		want := map[string]string{"agent.ops": "agent exited", "agent.ops.sidecar.db": "sidecar running", "agent.ops.gateway": "gateway running"}
		for addr, w := range want {
			if got[addr] != w {
				t.Errorf("%s: %q, want %q\n%s", addr, got[addr], w, r.stdout)
			}
		}
		human := mustRun(t, dir, "status")
		if !strings.Contains(human.stdout, "exited (3)") || !strings.Contains(human.stdout, "2 of 3 running") {
			t.Errorf("status:\n%s", human.stdout)
		}
	})

	t.Run("logs", func(t *testing.T) {
		r := mustRun(t, dir, "logs", "agent.ops")
		for _, want := range []string{"agent.ops | ", " agent-up\n", "agent.ops.sidecar.db | ", " sidecar-up\n", "agent.ops.gateway | ", `"event":"listening"`} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("merged logs lack %q:\n%s", want, r)
			}
		}
		if r := mustRun(t, dir, "logs", "-no-prefix", "-tail", "1", "agent.ops.sidecar.db"); r.stdout != "sidecar-up\n" {
			t.Errorf("logs of the sidecar alone: %s", r)
		}
	})

	mustRun(t, dir, "destroy", "-auto-approve")
	t.Run("previous", func(t *testing.T) {
		r := mustRun(t, dir, "logs", "-previous", "agent.ops")
		if !strings.Contains(r.stdout, " agent-last\n") || !strings.Contains(r.stdout, "agent.ops.sidecar.db | ") {
			t.Errorf("logs -previous after destroy: %s", r)
		}
	})
}
