// Package snapshot benchmarks the docker driver's snapshot action against
// the raw engine call it is built on. Run it by hand on a machine with a
// Docker engine:
//
//	go test -run='^$' -bench=. -benchtime=20x ./bench/snapshot/
//
// See README.md here for what is measured and the figures.
package snapshot

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// BenchmarkSnapshotVsCommit times, on one running agent container, the
// docker driver's Apply of a snapshot create (find the container, inspect
// its image's depth, a paused ContainerCommit with the agent's config,
// inspect the new image for the computed values) against a raw paused
// ContainerCommit of the same container through the same client library.
//
// Each iteration writes a fresh 64 KiB file into the container (outside
// the timing), then takes one raw commit and one snapshot, alternating
// which goes first, and removes both images (outside the timing). It
// reports each side's mean and median milliseconds and their ratio.
func BenchmarkSnapshotVsCommit(b *testing.B) {
	cli := dockertest.Client(b)
	img := dockertest.BusyboxImage(b, cli)
	lineage := dockertest.NewLineage()
	dockertest.Cleanup(b, cli, lineage)
	ctx := context.Background()

	d, err := docker.New(hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Configure(ctx, drivers.ConfigureRequest{Runtime: "bench", Config: cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String)})}); err != nil {
		b.Fatal(err)
	}
	defer d.(drivers.Closer).Close()
	apply := func(req drivers.ApplyRequest) drivers.ApplyResponse {
		req.Lineage = lineage
		if req.Hash == "" {
			req.Hash = "bench-" + req.Object.Addr
		}
		resp, err := d.Apply(ctx, req)
		if err != nil {
			b.Fatalf("%s %s: %v", req.Op, req.Object.Addr, err)
		}
		return resp
	}
	agent := &drivers.AgentSpec{
		Addr: "agent.bench",
		Name: "bench",
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":   cty.StringVal(img),
			"command": cty.ListVal([]cty.Value{cty.StringVal("sleep"), cty.StringVal("3600")}),
			"env":     cty.MapVal(map[string]cty.Value{"ROLE": cty.StringVal("bench")}),
			"workdir": cty.StringVal("/workspace"),
		}),
	}
	netObj := drivers.Object{Addr: "agent.bench.network", Kind: "network", Attrs: map[string]cty.Value{"internal": cty.True}}
	apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: netObj})
	ctr := apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: drivers.Object{
		Addr: "agent.bench", Kind: "container", Workload: true, DependsOn: []string{netObj.Addr},
		Attrs: map[string]cty.Value{"image": drivers.WorkloadAttr(agent.Workload, "image"), "command": drivers.WorkloadAttr(agent.Workload, "command"), "env": drivers.WorkloadAttr(agent.Workload, "env"), "workdir": drivers.WorkloadAttr(agent.Workload, "workdir"), "network": cty.StringVal(netObj.Addr)},
	}})
	write(b, cli, ctr.ID, "head -c 1048576 /dev/urandom > /workspace/base")

	var raw, snap []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		write(b, cli, ctr.ID, fmt.Sprintf("head -c 65536 /dev/urandom > /workspace/f%d", i))
		b.StartTimer()

		var rawID, snapID string
		takeRaw := func() {
			start := time.Now()
			resp, err := cli.ContainerCommit(ctx, ctr.ID, container.CommitOptions{Reference: fmt.Sprintf("bf-bench-raw:%d", i), Pause: true})
			raw = append(raw, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			rawID = resp.ID
		}
		takeSnap := func() {
			start := time.Now()
			resp := apply(drivers.ApplyRequest{Op: drivers.OpCreate, Agent: agent, Object: drivers.Object{
				Addr: fmt.Sprintf("agent.bench.snapshot.%d", i+1), Kind: drivers.KindSnapshot,
				Attrs: map[string]cty.Value{"agent": cty.StringVal("agent.bench"), "description": cty.NullVal(cty.String), "triggers": cty.NullVal(cty.Map(cty.String)), "policy": cty.True},
			}})
			snap = append(snap, time.Since(start))
			snapID = resp.ID
		}
		if i%2 == 0 {
			takeRaw()
			takeSnap()
		} else {
			takeSnap()
			takeRaw()
		}

		b.StopTimer()
		for _, id := range []string{rawID, snapID} {
			if _, err := cli.ImageRemove(ctx, id, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	rawMean, rawMed := stats(raw)
	snapMean, snapMed := stats(snap)
	b.ReportMetric(rawMean, "raw-commit-ms")
	b.ReportMetric(snapMean, "snapshot-ms")
	b.ReportMetric(rawMed, "raw-commit-median-ms")
	b.ReportMetric(snapMed, "snapshot-median-ms")
	b.ReportMetric(snapMean/rawMean, "ratio-mean")
	b.ReportMetric(snapMed/rawMed, "ratio-median")
	// Each iteration's pair was taken back to back: the median of their
	// ratios is the least sensitive to a loaded machine.
	ratios := make([]time.Duration, len(raw))
	for i := range raw {
		ratios[i] = time.Duration(float64(time.Millisecond) * float64(snap[i]) / float64(raw[i]))
	}
	_, pairMed := stats(ratios)
	b.ReportMetric(pairMed, "ratio-paired-median")
}

// stats returns the mean and the median in milliseconds.
func stats(ds []time.Duration) (mean, median float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	mid := s[len(s)/2]
	if len(s)%2 == 0 {
		mid = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return ms(sum) / float64(len(s)), ms(mid)
}

// write runs a shell command in the container.
func write(b *testing.B, cli *client.Client, id, script string) {
	b.Helper()
	if out := dockertest.Sh(b, cli, id, script); out != "" {
		b.Fatalf("%s: %s", script, out)
	}
}
