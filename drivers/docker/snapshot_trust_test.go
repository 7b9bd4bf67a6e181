package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// Real-engine tests of what issue 11 asks of snapshots: no secret in any
// image, none lost to a sweep, deletes that run in parallel, a built image
// that goes while snapshots need its layers, and no unlabelled leftovers.

// cleanupLabelled removes, when the test ends, the containers and images
// carrying label=value: what carries no lineage label (snapshot
// intermediates, build leftovers).
func cleanupLabelled(t *testing.T, cli *client.Client, label, value string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f := filters.NewArgs(filters.Arg("label", label+"="+value))
		ctrs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		for _, c := range ctrs {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
		imgs, _ := cli.ImageList(ctx, image.ListOptions{All: true, Filters: f})
		for _, img := range imgs {
			_, _ = cli.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true})
		}
	})
}

// lineageImages lists every image of the lineage (intermediate ones too).
func (e *snapEngine) lineageImages() []image.Summary {
	e.t.Helper()
	imgs, err := e.cli.ImageList(e.t.Context(), image.ListOptions{All: true, Filters: lineageFilter(e.lineage)})
	if err != nil {
		e.t.Fatal(err)
	}
	return imgs
}

// TestIntegrationSnapshotHoldsNoSecret: a sensitive value in the agent's
// env, command and labels is in its container (so the test can fail), and
// in no byte of any image of the lineage (inspect JSON, history), of a
// docker save of each snapshot, or of a snapshot export, committed or
// flattened; no intermediate stays behind.
func TestIntegrationSnapshotHoldsNoSecret(t *testing.T) {
	t.Parallel()
	const secret = "sk-bottlefile-test-7f3a9c"
	e := newSnapEngine(t, 100)
	cleanupLabelled(t, e.cli, labelSnapshotIntermediate, e.lineage)
	a := e.agentSpec("keeper")
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "env", cty.MapVal(map[string]cty.Value{"ROLE": cty.StringVal("snap"), "API_KEY": cty.StringVal(secret).Mark("sensitive")}))
	a.Workload = drivers.WithWorkloadAttr(a.Workload, "command", cty.ListVal([]cty.Value{cty.StringVal("sh"), cty.StringVal("-c"), cty.StringVal("exec sleep 600 # " + secret).Mark("sensitive")}))
	netObj, ctrObj := agentObjects(a)
	ctrObj.Attrs["labels"] = cty.MapVal(map[string]cty.Value{"key": cty.StringVal(secret).Mark("sensitive")})
	e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: netObj})
	ctrID := e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj}).ID
	dockertest.Sh(t, e.cli, ctrID, "echo work > /workspace/f")
	if _, raw, err := e.cli.ContainerInspectWithRaw(t.Context(), ctrID, false); err != nil || bytes.Count(raw, []byte(secret)) < 3 {
		t.Fatalf("the container does not hold the secret in env, command and labels (%v): the test proves nothing", err)
	}

	committed := e.snapshot(a, "agent.keeper.snapshot.1")
	flat := newSnapEngine(t, 1) // flattens every snapshot
	flat.lineage = e.lineage
	flattened := flat.snapshot(a, "agent.keeper.snapshot.2")
	if committed.Computed["depth"] == "1" || flattened.Computed["depth"] != "1" {
		t.Fatalf("depths %s and %s: want a commit and a flattened one", committed.Computed["depth"], flattened.Computed["depth"])
	}

	imgs := e.lineageImages()
	if len(imgs) != 2 {
		t.Errorf("%d images of the lineage, want the 2 snapshots", len(imgs))
	}
	for _, img := range imgs {
		var buf bytes.Buffer
		if _, err := e.cli.ImageInspect(t.Context(), img.ID, client.ImageInspectWithRawResponse(&buf)); err != nil {
			t.Fatal(err)
		}
		if raw := buf.Bytes(); bytes.Contains(raw, []byte(secret)) {
			t.Errorf("image %s: the secret is in its inspect JSON:\n%s", shortID(img.ID), raw)
		}
		hist, err := e.cli.ImageHistory(t.Context(), img.ID)
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := json.Marshal(hist); bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte("sleep")) {
			t.Errorf("image %s: the history holds the command:\n%s", shortID(img.ID), data)
		}
	}
	for _, r := range []drivers.ApplyResponse{committed, flattened} {
		ref := r.Snapshot.Image
		rc, err := e.cli.ImageSave(t.Context(), []string{ref})
		if err != nil {
			t.Fatal(err)
		}
		saved, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		var exported bytes.Buffer
		if err := e.d.ExportSnapshot(t.Context(), ref, &exported); err != nil {
			t.Fatal(err)
		}
		if len(saved) < 1<<20 || !bytes.Contains(saved, []byte("work\n")) {
			t.Errorf("%s: the save (%d bytes) lacks the agent's file: the grep proves nothing", ref, len(saved))
		}
		if bytes.Contains(saved, []byte(secret)) || bytes.Contains(exported.Bytes(), []byte(secret)) {
			t.Errorf("%s: the secret is in its docker save or snapshot export", ref)
		}
		if got := dockertest.RunImage(t, e.cli, ref, "cat", "/workspace/f"); got != "work\n" {
			t.Errorf("%s: /workspace/f = %q", ref, got)
		}
	}
	inter, err := e.cli.ImageList(t.Context(), image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelSnapshotIntermediate+"="+e.lineage))})
	if err != nil || len(inter) != 0 {
		t.Errorf("intermediates left behind: %d (%v)", len(inter), err)
	}
}

// TestIntegrationSnapshotSweepRace: snapshots are taken while sweeps of
// the same lineage run all the time (as after the deletes of a parallel
// destroy), and while another lineage's sweep (another process, which
// shares no lock with this one) runs too: every snapshot taken is there
// afterwards, with the id it was reported with.
func TestIntegrationSnapshotSweepRace(t *testing.T) {
	t.Parallel()
	e := newSnapEngine(t, 100)
	other := newSnapEngine(t, 100)
	a := e.agentSpec("racer")
	_, ctrID := e.run(a, "")
	api, _, err := e.d.engine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	oapi, _, err := other.d.engine(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	const n = 8
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sweeps := [2]int{}
	for i, sweep := range []func(){
		func() { e.d.sweepSnapshots(t.Context(), api, e.lineage); time.Sleep(5 * time.Millisecond) }, // paced: a skipped sweep returns at once
		func() { other.d.sweepLocked(t.Context(), oapi, other.lineage) },                             // no lock: another process
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sweep()
				sweeps[i]++
			}
		}()
	}
	taken := map[string]drivers.ApplyResponse{}
	for i := range n {
		dockertest.Sh(t, e.cli, ctrID, fmt.Sprintf("echo %d >> /workspace/f", i))
		addr := fmt.Sprintf("agent.racer.snapshot.%d", i+1)
		taken[addr] = e.snapshot(a, addr)
	}
	close(stop)
	wg.Wait()
	e.d.sweepPending(t.Context(), api)
	if sweeps[0] == 0 || sweeps[1] == 0 {
		t.Fatalf("sweeps ran %v times: the test raced nothing", sweeps)
	}
	for addr, r := range taken {
		info, err := e.cli.ImageInspect(t.Context(), r.Snapshot.Image)
		if err != nil || info.ID != r.ID {
			t.Errorf("%s: snapshot %s lost (%v, id %s)", addr, r.ID, err, info.ID)
		}
	}
	t.Logf("%d snapshots taken during %d sweeps of the lineage and %d of another", n, sweeps[0], sweeps[1])
}

// TestIntegrationSnapshotParallelDeletes: deleting many snapshots at once
// (those of a container booted from an earlier one among them) and the
// container succeeds, each once and again, and leaves nothing of the
// lineage.
func TestIntegrationSnapshotParallelDeletes(t *testing.T) {
	t.Parallel()
	e := newSnapEngine(t, 100)
	a := e.agentSpec("many")
	netID, ctrID := e.run(a, "")
	var snaps []drivers.ApplyResponse
	for i := range 3 {
		dockertest.Sh(t, e.cli, ctrID, fmt.Sprintf("echo %d >> /workspace/f", i))
		snaps = append(snaps, e.snapshot(a, fmt.Sprintf("agent.many.snapshot.%d", i+1)))
	}
	// Boot from the last and take more: they share its layers.
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: ctrID, Object: drivers.Object{Addr: a.Addr, Kind: kindContainer}})
	_, ctrObj := agentObjects(a)
	ctrID = e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj, BootImage: snaps[2].Snapshot.Image}).ID
	for i := 3; i < 6; i++ {
		dockertest.Sh(t, e.cli, ctrID, fmt.Sprintf("echo %d >> /workspace/f", i))
		snaps = append(snaps, e.snapshot(a, fmt.Sprintf("agent.many.snapshot.%d", i+1)))
	}

	for round := range 2 { // the second round finds them gone
		var wg sync.WaitGroup
		errs := make([]error, len(snaps)+1)
		for i, s := range snaps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: e.lineage, ID: s.ID,
					Object: drivers.Object{Addr: fmt.Sprintf("agent.many.snapshot.%d", i+1), Kind: drivers.KindSnapshot}})
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[len(snaps)] = e.d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: e.lineage, ID: ctrID, Object: drivers.Object{Addr: a.Addr, Kind: kindContainer}})
		}()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, delete %d: %v", round, i, err)
			}
		}
	}
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: netID, Object: drivers.Object{Addr: a.Addr + ".network", Kind: kindNetwork}})
	e.d.sweepPending(t.Context(), e.mustAPI())
	for _, img := range e.lineageImages() {
		t.Errorf("left behind: image %s %v", shortID(img.ID), img.RepoTags)
	}
}

func (e *snapEngine) mustAPI() dockerAPI {
	api, _, err := e.d.engine(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return api
}

// buildObjects are the image and container objects of an agent with a
// build block of dir.
func (e *snapEngine) buildObjects(a *drivers.AgentSpec, dir string) (drivers.Object, drivers.Object) {
	e.t.Helper()
	bc, err := resolveBuildContext(dir, "")
	if err != nil {
		e.t.Fatal(err)
	}
	sum, err := hashContext(bc)
	if err != nil {
		e.t.Fatal(err)
	}
	imgObj := drivers.Object{Addr: a.Addr + ".image", Kind: kindImage, Attrs: map[string]cty.Value{
		"context": cty.StringVal(dir), "dockerfile": cty.NullVal(cty.String), "context_hash": cty.StringVal(sum),
	}}
	_, ctrObj := agentObjects(a)
	ctrObj.Attrs["image"] = cty.NullVal(cty.String)
	ctrObj.Attrs["build_hash"] = cty.StringVal(sum)
	return imgObj, ctrObj
}

// TestIntegrationBuiltImageGoesWithKeptSnapshots: destroying an agent
// with a build block after snapshots of it (the before-destroy policy)
// deletes the container and the built image without error; the kept
// snapshots still boot, with the work in them. A snapshot committed on
// top of the built image the old way (a child image) does not block the
// delete either: the built image is untagged, and goes with that
// snapshot's delete.
func TestIntegrationBuiltImageGoesWithKeptSnapshots(t *testing.T) {
	t.Parallel()
	e := newSnapEngine(t, 100)
	cleanupLabelled(t, e.cli, labelBuildOf, e.lineage)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM " + e.image + "\nCOPY hello /hello\n", "hello": "built\n"})
	a := e.agentSpec("built")
	imgObj, ctrObj := e.buildObjects(a, dir)
	netObj, _ := agentObjects(a)
	netID := e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: netObj}).ID
	built := e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: imgObj})
	ctrID := e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj}).ID
	dockertest.Sh(t, e.cli, ctrID, "echo work > /workspace/f")
	s1 := e.snapshot(a, "agent.built.snapshot.1")
	// The old way: a commit tagged as a snapshot, a child of the built image.
	legacyRef, _ := engine.SnapshotRef(e.lineage, "agent.built.snapshot.2", a.Addr)
	legacy, err := e.cli.ContainerCommit(t.Context(), ctrID, container.CommitOptions{Reference: legacyRef, Config: &container.Config{Labels: map[string]string{
		drivers.LabelLineage: e.lineage, drivers.LabelAddress: "agent.built.snapshot.2", labelSnapshotOf: a.Addr,
	}}})
	if err != nil {
		t.Fatal(err)
	}

	// destroy: the container, then the image.
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: ctrID, Object: drivers.Object{Addr: a.Addr, Kind: kindContainer}})
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: built.ID, Object: imgObj})
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: netID, Object: netObj})
	if _, err := e.cli.ImageInspect(t.Context(), built.Computed["tag"]); !cerrdefs.IsNotFound(err) {
		t.Errorf("the built image's tag is still there: %v", err)
	}
	for _, ref := range []string{s1.Snapshot.Image, legacyRef} {
		if got := dockertest.RunImage(t, e.cli, ref, "cat", "/hello", "/workspace/f"); got != "built\nwork\n" {
			t.Errorf("%s after the destroy: %q", ref, got)
		}
	}
	live, err := e.d.Read(t.Context(), drivers.ReadRequest{Lineage: e.lineage})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range live.Objects {
		if o.Kind != drivers.KindSnapshot {
			t.Errorf("after the destroy Read lists %s (%s %s): the built image kept for the old-style snapshot must not be", o.Addr, o.Kind, shortID(o.ID))
		}
	}
	// The next destroy runs again: nothing is left to fail on.
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: built.ID, Object: imgObj})

	// Deleting the snapshots (destroy -include-snapshots) leaves nothing.
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: s1.ID, Object: drivers.Object{Addr: "agent.built.snapshot.1", Kind: drivers.KindSnapshot}})
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: legacy.ID, Object: drivers.Object{Addr: "agent.built.snapshot.2", Kind: drivers.KindSnapshot}})
	e.d.sweepPending(t.Context(), e.mustAPI())
	for _, img := range e.lineageImages() {
		t.Errorf("left behind: image %s %v", shortID(img.ID), img.RepoTags)
	}
	if _, err := e.cli.ImageInspect(t.Context(), built.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("the built image outlived its last snapshot: %v", err)
	}
}

// TestIntegrationCancelledBuildLeavesNothingUnlabelled: a build cut off
// while a RUN step runs leaves images and maybe containers; every one of
// them carries the build label, and the next sweep removes them all.
func TestIntegrationCancelledBuildLeavesNothingUnlabelled(t *testing.T) {
	t.Parallel()
	e := newSnapEngine(t, 100)
	cleanupLabelled(t, e.cli, labelBuildOf, e.lineage)
	marker := "marker-" + e.lineage
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM " + e.image + "\nRUN echo " + marker + " > /marker\nRUN sleep 120\nCMD [\"sleep\", \"600\"]\n"})
	a := e.agentSpec("cut")
	imgObj, _ := e.buildObjects(a, dir)
	byBuild := filters.NewArgs(filters.Arg("label", labelBuildOf+"="+e.lineage))

	// Held, the driver's own sweep after the failed build waits for
	// Close (sweepPending): first the test sees what the build left.
	imageMaking.RLock()
	var once sync.Once
	release := func() { once.Do(imageMaking.RUnlock) }
	t.Cleanup(release) // also when the test fails halfway
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := e.d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: e.lineage, Hash: "h", Object: imgObj})
		done <- err
	}()
	// Cut the build off once its "RUN sleep" container runs.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ctrs, err := e.cli.ContainerList(t.Context(), container.ListOptions{Filters: byBuild})
		if err != nil {
			t.Fatal(err)
		}
		if len(ctrs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the build never reached its RUN sleep step: %v", <-done)
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled build succeeded")
	}
	// The engine stops the build step once it sees the client gone.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		ctrs, _ := e.cli.ContainerList(t.Context(), container.ListOptions{Filters: byBuild})
		if len(ctrs) == 0 || time.Now().After(deadline) {
			break
		}
	}

	// Every image that holds the build's steps carries the label.
	all, err := e.cli.ImageList(t.Context(), image.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, img := range all {
		hist, err := e.cli.ImageHistory(t.Context(), img.ID)
		if err != nil {
			continue // removed meanwhile by another test
		}
		data, _ := json.Marshal(hist)
		if !bytes.Contains(data, []byte(marker)) && !bytes.Contains(data, []byte(e.lineage)) {
			continue
		}
		mine++
		if img.Labels[labelBuildOf] != e.lineage {
			t.Errorf("image %s of the cut-off build has labels %v", shortID(img.ID), img.Labels)
		}
	}
	if mine == 0 {
		t.Fatal("the cut-off build left no image: the test proves nothing")
	}
	t.Logf("the cut-off build left %d images", mine)

	release()
	e.d.sweepPending(t.Context(), e.mustAPI())
	imgs, err := e.cli.ImageList(t.Context(), image.ListOptions{All: true, Filters: byBuild})
	if err != nil {
		t.Fatal(err)
	}
	ctrs, err := e.cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: byBuild})
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs)+len(ctrs) != 0 {
		t.Errorf("after the sweep: %d images and %d containers of the cut-off build (of %d images)", len(imgs), len(ctrs), mine)
	}
}
