package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
)

// BenchmarkPlanInSync times `bottlefile plan` through the command layer,
// with the fake driver, for a Bottlefile of N agents whose state is in sync
// with the runtime: parse and evaluate the configuration, open and read the
// state, refresh (one Read), expand every agent and diff, and print "No
// changes.". The state is made by one apply of the same configuration
// through the command layer, outside the timing.
//
// Besides time and allocations per plan it reports:
//   - cpu-ms/op: the process's CPU time per plan (user and system, all
//     threads, the garbage collector's included), which other load on the
//     machine changes far less than wall time;
//   - peak-MB: the largest heap in use (runtime.MemStats.HeapAlloc, sampled
//     every millisecond) during one more plan outside the timing, all the
//     process holds included (the fake runtime's objects too).
func BenchmarkPlanInSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) { benchPlan(b, n) })
	}
}

func benchPlan(b *testing.B, agents int) {
	ws := newWorkspace(b, agents)
	if code, out, errs := ws.run(&command.ApplyCommand{Meta: ws.meta(nil)}, "-auto-approve"); code != 0 {
		b.Fatalf("apply of %d agents: exit %d\n%s%s", agents, code, tail(out), errs)
	}
	if code, out, errs := ws.run(&command.PlanCommand{Meta: ws.meta(nil)}); code != 0 || !strings.Contains(out, "No changes.") {
		b.Fatalf("plan after apply is not empty: exit %d\n%s%s", code, tail(out), errs)
	}

	meta := ws.meta(io.Discard)
	plan := func() {
		if code := (&command.PlanCommand{Meta: meta}).Run(nil); code != 0 {
			b.Fatalf("plan: exit %d", code)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		plan()
	}
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	}
	// One more plan, outside the timing, watched for its peak heap.
	peak := watchHeap()
	plan()
	b.ReportMetric(float64(peak())/(1<<20), "peak-MB")
}

// workspace is a Bottlefile directory whose runtime is one fake driver.
type workspace struct {
	dir  string
	fake *drivertest.Fake
}

func newWorkspace(b *testing.B, agents int) *workspace {
	b.Helper()
	dir := b.TempDir()
	var src strings.Builder
	for i := range agents {
		fmt.Fprintf(&src, `agent "a%05d" {
  image   = "acme/agent:1.4"
  command = ["sleep", "86400"]
  env     = { ROLE = "coder", N = "%d" }
  workdir = "/workspace"
}

`, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "Bottlefile"), []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return &workspace{dir: dir, fake: &drivertest.Fake{DriverName: "docker"}}
}

// meta is what a command runs with; stdout nil means a fresh buffer.
func (w *workspace) meta(stdout io.Writer) *command.Meta {
	if stdout == nil {
		stdout = &bytes.Buffer{}
	}
	return &command.Meta{
		Stdout: stdout, Stderr: &bytes.Buffer{}, Stdin: strings.NewReader(""),
		Log:      hclog.NewNullLogger(),
		Registry: drivers.Registry{"docker": w.fake.Factory()},
		Ctx:      context.Background(), Abandon: context.Background(),
		Dir: w.dir,
	}
}

func (w *workspace) run(c interface{ Run([]string) int }, args ...string) (int, string, string) {
	var m *command.Meta
	switch c := c.(type) {
	case *command.ApplyCommand:
		m = c.Meta
	case *command.PlanCommand:
		m = c.Meta
	}
	code := c.Run(args)
	return code, m.Stdout.(*bytes.Buffer).String(), m.Stderr.(*bytes.Buffer).String()
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// watchHeap samples the heap in use every millisecond from now until the
// returned function is called, which returns the largest sample.
func watchHeap() func() uint64 {
	runtime.GC()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(stop)
		wg.Wait()
		return peak
	}
}
