package bench

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/state"
)

// BenchmarkStatus times `bottlefile status` through the command layer,
// with the fake driver, for 100 bottles of three workloads each (agent,
// sidecar, gateway): parse the Bottlefile, read the state, one Read of the
// runtime (sizes included), read each gateway's decision log of the last
// hour (20 decisions, 8 of them denials) for the denials column, and
// print a line per bottle and per workload. It reports the runtime reads
// per status, which must stay one per runtime whatever the number of
// bottles: with docker that is one container list, one network list and
// one image list; and the gateway log reads, one per gateway, at most 8
// at a time.
func BenchmarkStatus(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("bottles=%d", n), func(b *testing.B) { benchStatus(b, n) })
	}
}

func benchStatus(b *testing.B, bottles int) {
	ws := newWorkspace(b, bottles)
	if code, out, errs := ws.run(&command.ApplyCommand{Meta: ws.meta(nil)}, "-auto-approve"); code != 0 {
		b.Fatalf("apply of %d agents: exit %d\n%s%s", bottles, code, tail(out), errs)
	}
	lineage := lineageOf(b, ws)
	start := time.Now()
	for i := range bottles {
		for _, suffix := range []string{".sidecar.db", ".gateway"} {
			ws.fake.Put(lineage, drivers.LiveObject{Addr: fmt.Sprintf("agent.a%05d%s", i, suffix), Kind: drivertest.KindContainer, ID: "x", Running: true, State: drivers.StateRunning})
		}
		for j := range 20 {
			allowed := j%5 > 1
			ws.fake.Say(lineage, fmt.Sprintf("agent.a%05d.gateway", i), false, fmt.Sprintf(
				`{"time":%q,"source":"10.213.0.2:4%04d","destination":"host%d.example:443","rule":"","allowed":%t,"outcome":"denied","reason":"no rule allows it","serial":1}`,
				start.Add(time.Duration(j-30)*time.Minute).UTC().Format(time.RFC3339Nano), j, j%3, allowed))
		}
	}
	var out strings.Builder
	if code := (&command.StatusCommand{Meta: ws.meta(&out)}).Run(nil); code != 0 || strings.Count(out.String(), "3 of 3 running") != bottles || strings.Count(out.String(), "  8\n") != bottles {
		b.Fatalf("status: exit %d\n%s", code, tail(out.String()))
	}
	meta := ws.meta(io.Discard)
	reads := ws.fake.ReadCalls
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if code := (&command.StatusCommand{Meta: meta}).Run(nil); code != 0 {
			b.Fatalf("status: exit %d", code)
		}
	}
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	}
	b.ReportMetric(float64(ws.fake.ReadCalls-reads)/float64(b.N), "reads/op")
}

// lineageOf is the lineage the apply gave the workspace's state.
func lineageOf(b *testing.B, ws *workspace) string {
	s, err := state.Open(ws.dir, state.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	return s.Lineage()
}
