package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
)

// BenchmarkTick times one `bottlefile tick` through the command layer,
// with the fake driver, over 100 bottles whose agents have a time policy
// (issue 31), in two cases:
//
//   - nothing-due: snapshot_policy { every = "24h" } and idle {
//     stop_after = "24h" } on every agent, nothing due: the read-only
//     plan alone (parse, read the state, one Read of the runtime, one
//     Activity call for the idle agents, diff), no state lock taken, no
//     engine change. What a cron line costs every minute.
//   - snapshot-all: every = "1ms" and keep_last = 2 on every agent: each
//     tick is due for all 100, so it plans read-only, takes the lock,
//     plans again and applies 100 snapshot creates and (after the first
//     two ticks) 100 prunes.
//
// Besides time it reports, per tick, the runtime reads (Read, one list
// call per object kind on docker), the activity looks (Activity, one per
// runtime) and the driver applies (one per snapshot taken or pruned).
func BenchmarkTick(b *testing.B) {
	for _, c := range []struct {
		name, policy string
	}{
		{"nothing-due", "snapshot_policy {\n    every = \"24h\"\n  }\n  idle {\n    stop_after = \"24h\"\n  }"},
		{"snapshot-all", "snapshot_policy {\n    every     = \"1ms\"\n    keep_last = 2\n  }"},
	} {
		b.Run(fmt.Sprintf("%s/bottles=100", c.name), func(b *testing.B) { benchTick(b, 100, c.policy) })
	}
}

func benchTick(b *testing.B, bottles int, policy string) {
	ws := newWorkspace(b, 0)
	var src strings.Builder
	for i := range bottles {
		fmt.Fprintf(&src, "agent \"a%05d\" {\n  image   = \"acme/agent:1.4\"\n  command = [\"sleep\", \"86400\"]\n  %s\n}\n\n", i, policy)
	}
	if err := os.WriteFile(filepath.Join(ws.dir, "Bottlefile"), []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if code, out, errs := ws.run(&command.ApplyCommand{Meta: ws.meta(nil)}, "-auto-approve"); code != 0 {
		b.Fatalf("apply of %d agents: exit %d\n%s%s", bottles, code, tail(out), errs)
	}
	var out strings.Builder
	if code := (&command.TickCommand{Meta: ws.meta(&out)}).Run(nil); code != 0 {
		b.Fatalf("tick: exit %d\n%s", code, tail(out.String()))
	}
	meta := ws.meta(io.Discard)
	reads, acts, applies := ws.fake.ReadCalls, ws.fake.ActivityCalls, ws.fake.ApplyCalls
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if code := (&command.TickCommand{Meta: meta}).Run(nil); code != 0 {
			b.Fatalf("tick: exit %d", code)
		}
	}
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	}
	b.ReportMetric(float64(ws.fake.ReadCalls-reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(ws.fake.ActivityCalls-acts)/float64(b.N), "activity/op")
	b.ReportMetric(float64(ws.fake.ApplyCalls-applies)/float64(b.N), "applies/op")
}
