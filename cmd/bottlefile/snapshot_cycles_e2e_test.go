package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// cyclesEnv sets how many cycles TestE2ESnapshotCycles runs (default 2;
// the full fault trial is bench/snapshot-cycles.sh's 30).
const cyclesEnv = "BOTTLEFILE_TEST_SNAPSHOT_CYCLES"

// TestE2ESnapshotCycles is the short form of issue 11's fault loop: it
// runs bench/snapshot-cycles.sh with the binary built for these tests, for
// 2 cycles of apply / change (a replace of every agent) / destroy of 5
// agents with egress and snapshot_policy before = ["replace", "destroy"],
// at the default parallelism. Every phase must exit 0, every agent must
// resume with all the work it wrote, and every plan after an apply must
// be empty. The script cleans up after itself (destroy
// -include-snapshots, then by lineage label); so does the test.
func TestE2ESnapshotCycles(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	bash, err := exec.LookPath("bash")
	if err != nil {
		snapRequire(t, "bench/snapshot-cycles.sh needs bash: %v", err)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		snapRequire(t, "bench/snapshot-cycles.sh needs the docker CLI: %v", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "bench", "snapshot-cycles.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cycles := "2"
	if v := os.Getenv(cyclesEnv); v != "" {
		cycles = v
	}
	work := t.TempDir()
	t.Cleanup(func() {
		if lineage, _ := readState(t, work); lineage != "" {
			snapRemoveImages(t, cli, lineage)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "CYCLES="+cycles, "AGENTS=5", "PARALLELISM=",
		"BOTTLEFILE="+binary, "IMAGE="+img, "WORK="+work)
	err = cmd.Run()
	t.Logf("bench/snapshot-cycles.sh CYCLES=%s AGENTS=5:\n%s", cycles, out.String())
	result := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "RESULT ") {
			result = line
		}
	}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the fault loop did not end within 30 minutes")
	case result == "":
		t.Fatalf("the fault loop printed no RESULT line (%v)", err)
	case err != nil:
		t.Errorf("the fault loop failed (%v): %s", err, result)
	}
	if lineage, _ := readState(t, work); lineage != "" {
		if left := trustLineageLeft(t, cli, lineage); len(left) != 0 {
			t.Errorf("left after the fault loop's cleanup:\n  %s", strings.Join(left, "\n  "))
		}
	}
}
