package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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

func TestSnapshotRef(t *testing.T) {
	const lineage = "0f1e2d3c-aaaa-bbbb-cccc-000000000000"
	for _, c := range []struct{ addr, agent, prefix, suffix string }{
		{"agent.coder.snapshot.3", "agent.coder", "bf-0f1e2d3c-coder-snap:3", ""},
		{"agent.coder.snapshot.12", "agent.coder", "bf-0f1e2d3c-coder-snap:12", ""},
		{"snapshot.nightly", "agent.coder", "bf-0f1e2d3c-coder-snap:nightly", ""},
		// A name the engine would not take as a repository is folded and
		// keeps a hash of the original.
		{"snapshot.Before_Refactor-2", "agent.Coder", "bf-0f1e2d3c-coder-", "-snap:Before_Refactor-2"},
		// All digits could be taken for a policy snapshot: hashed instead.
		{"snapshot.7", "agent.coder", "bf-0f1e2d3c-coder-snap:s-", "hash"},
		{"snapshot.-x", "agent.coder", "bf-0f1e2d3c-coder-snap:s-", "hash"},
	} {
		got, err := engine.SnapshotRef(lineage, c.addr, c.agent)
		if err != nil {
			t.Errorf("%s: %v", c.addr, err)
			continue
		}
		switch c.suffix {
		case "":
			if got != c.prefix {
				t.Errorf("%s: got %q, want %q", c.addr, got, c.prefix)
			}
		case "hash":
			if !strings.HasPrefix(got, c.prefix) || len(got) != len(c.prefix)+12 {
				t.Errorf("%s: got %q, want %q and a 12-digit hash", c.addr, got, c.prefix)
			}
		default:
			if !strings.HasPrefix(got, c.prefix) || !strings.HasSuffix(got, c.suffix) {
				t.Errorf("%s: got %q, want %q...%q", c.addr, got, c.prefix, c.suffix)
			}
		}
		if !isSnapshotTag(lineage, got) {
			t.Errorf("isSnapshotTag(%q) = false", got)
		}
	}
	if isSnapshotTag(lineage, "bf-0f1e2d3c-coder:abc") || isSnapshotTag(lineage, "bf-99999999-coder-snap:1") {
		t.Error("isSnapshotTag accepts a built image or another lineage's snapshot")
	}
	if _, err := engine.SnapshotRef(lineage, "agent.coder.snapshot.1", "coder"); err == nil {
		t.Error("an agent address not below agent. was accepted")
	}
}

func TestParseSnapshotConfig(t *testing.T) {
	cfg := func(v cty.Value) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "flatten_depth": v})
	}
	for _, c := range []struct {
		cfg     cty.Value
		want    int
		wantErr string
	}{
		{cty.NilVal, DefaultFlattenDepth, ""},
		{cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String)}), DefaultFlattenDepth, ""},
		{cfg(cty.NullVal(cty.Number)), DefaultFlattenDepth, ""},
		{cfg(cty.NumberIntVal(3)), 3, ""},
		{cfg(cty.NumberIntVal(125)), 125, ""},
		{cfg(cty.NumberIntVal(0)), 0, "between 1"},
		{cfg(cty.NumberIntVal(126)), 0, "126th layer"},
		{cfg(cty.NumberFloatVal(2.5)), 0, "whole number"},
	} {
		got, err := parseSnapshotConfig(c.cfg)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%#v: error %v, want one mentioning %q", c.cfg, err, c.wantErr)
		case c.wantErr == "" && err != nil:
			t.Errorf("%#v: %v", c.cfg, err)
		case c.wantErr == "" && got.flattenDepth != c.want:
			t.Errorf("%#v: flatten_depth %d, want %d", c.cfg, got.flattenDepth, c.want)
		}
	}
	if _, ok := (&Driver{}).Declare().Schema.Runtime["flatten_depth"]; !ok {
		t.Error("ConfigSpec lacks flatten_depth")
	}
}

func TestNeedsFlatten(t *testing.T) {
	for _, c := range []struct {
		layers, threshold int
		want              bool
	}{
		{1, 100, false}, {98, 100, false}, {99, 100, true}, {120, 100, true},
		{1, 3, false}, {2, 3, true}, {1, 1, true}, {1, 2, true},
	} {
		if got := needsFlatten(c.layers, c.threshold); got != c.want {
			t.Errorf("needsFlatten(%d, %d) = %t, want %t", c.layers, c.threshold, got, c.want)
		}
	}
}

// TestSnapshotImageConfig: a snapshot image's config is the base image's
// (its command, env, workdir, user, its own labels but bottlefile's),
// bottlefile's labels, the intermediate's layers and platform, and a
// history naming no command; nothing of the intermediate's (the
// container's) config.
func TestSnapshotImageConfig(t *testing.T) {
	base := withConfig(image.InspectResponse{ID: "sha256:base", Architecture: "arm64", Variant: "v8", Os: "linux", Created: "2026-01-02T03:04:05Z"}, map[string]any{
		"Cmd": []string{"sh"}, "Entrypoint": []string{"/init"}, "Env": []string{"PATH=/bin"}, "WorkingDir": "/w", "User": "1000",
		"Labels": map[string]string{"team": "infra", drivers.LabelAddress: "agent.old", labelBuildOf: "L"},
	})
	base.RootFS.Layers = []string{"sha256:l1", "sha256:l2"}
	inter := withConfig(image.InspectResponse{ID: "sha256:inter", Architecture: "amd64", Os: "linux"}, map[string]any{
		"Cmd": []string{"sleep", "s3cret"}, "Env": []string{"TOKEN=s3cret"}, "Labels": map[string]string{"k": "s3cret"},
	})
	inter.RootFS.Layers = []string{"sha256:l1", "sha256:l2", "sha256:new"}
	//lint:ignore SA1019 what a commit records: the config must not copy it
	inter.ContainerConfig = &container.Config{Env: []string{"TOKEN=s3cret"}}
	labels := map[string]string{drivers.LabelAddress: "agent.coder.snapshot.1", labelSnapshotOf: "agent.coder"}
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

	data, err := snapshotImageConfig(&base, inter, labels, "base layer", "bottlefile snapshot agent.coder.snapshot.1", now)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cret") {
		t.Fatalf("the config holds the container's values:\n%s", data)
	}
	var got struct {
		Architecture, Variant, OS string
		Created                   time.Time
		Config                    struct {
			Cmd, Entrypoint, Env []string
			WorkingDir, User     string
			Labels               map[string]string
		}
		ContainerConfig json.RawMessage `json:"container_config"`
		RootFS          struct {
			Type    string
			DiffIDs []string `json:"diff_ids"`
		}
		History []struct {
			Created   time.Time
			CreatedBy string `json:"created_by"`
		}
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Config
	if !slices.Equal(c.Cmd, []string{"sh"}) || !slices.Equal(c.Entrypoint, []string{"/init"}) || !slices.Equal(c.Env, []string{"PATH=/bin"}) || c.WorkingDir != "/w" || c.User != "1000" {
		t.Errorf("config %+v: want the base image's", c)
	}
	wantLabels := map[string]string{"team": "infra", drivers.LabelAddress: "agent.coder.snapshot.1", labelSnapshotOf: "agent.coder"}
	if fmt.Sprint(c.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("labels %v, want %v", c.Labels, wantLabels)
	}
	if got.Architecture != "arm64" || got.Variant != "v8" || got.OS != "linux" || !got.Created.Equal(now) || got.ContainerConfig != nil {
		t.Errorf("platform %s/%s/%s created %v container_config %s", got.OS, got.Architecture, got.Variant, got.Created, got.ContainerConfig)
	}
	if got.RootFS.Type != "layers" || !slices.Equal(got.RootFS.DiffIDs, inter.RootFS.Layers) {
		t.Errorf("rootfs %+v", got.RootFS)
	}
	if len(got.History) != 3 || got.History[0].CreatedBy != got.History[1].CreatedBy || got.History[2].CreatedBy != "bottlefile snapshot agent.coder.snapshot.1" ||
		!got.History[2].Created.Equal(now) || got.History[0].Created.Year() != 2026 || got.History[0].Created.Month() != 1 {
		t.Errorf("history %+v", got.History)
	}

	// No base image (removed by hand): an empty config, the
	// intermediate's platform, every layer the snapshot's own.
	data, err = snapshotImageConfig(nil, inter, labels, "base layer", "bottlefile snapshot agent.coder.snapshot.1", now)
	if err != nil {
		t.Fatal(err)
	}
	got.Config.Cmd, got.History = nil, nil
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cret") || got.Config.Cmd != nil || got.Architecture != "amd64" || len(got.History) != 3 || got.History[0].CreatedBy != got.History[2].CreatedBy {
		t.Errorf("without a base image: %s", data)
	}
}

// TestIntermediateLabels: a commit adds the container's labels to those
// given, so every other io.bottlefile.* one is overridden; the
// intermediate carries the lineage and the snapshot's address from the
// moment it exists, and is marked an intermediate.
func TestIntermediateLabels(t *testing.T) {
	got := intermediateLabels(map[string]string{drivers.LabelLineage: "L", labelSnapshotOf: "agent.x", labelBuildOf: "L", "user": "v"}, "L", "agent.x.snapshot.2")
	want := map[string]string{drivers.LabelLineage: "L", drivers.LabelAddress: "agent.x.snapshot.2", drivers.LabelConfigHash: "", labelSnapshotOf: "", labelBuildOf: "", labelSnapshotIntermediate: "L"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// withConfig gives an image a config (through JSON, so as to name no
// config type of the engine's API).
func withConfig(img image.InspectResponse, cfg map[string]any) image.InspectResponse {
	data, _ := json.Marshal(map[string]any{"Config": cfg})
	if err := json.Unmarshal(data, &img); err != nil {
		panic(err)
	}
	return img
}

// saveTar makes a docker-save style tar.
func saveTar(t *testing.T, files map[string]string, order []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range order {
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRetagSave(t *testing.T) {
	layer := strings.Repeat("L", 100000)
	files := map[string]string{
		"abc/layer.tar":  layer,
		"1234abcd.json":  `{"config":{"Labels":{"io.bottlefile.address":"agent.coder.snapshot.2"}}}`,
		"manifest.json":  `[{"Config":"1234abcd.json","RepoTags":["bf-other-coder-snap:2","evil:latest"],"Layers":["abc/layer.tar"]}]`,
		"repositories":   `{"evil":{"latest":"abc"}}`,
		"trailing/extra": "x",
	}
	in := saveTar(t, files, []string{"1234abcd.json", "abc/layer.tar", "manifest.json", "repositories", "trailing/extra"})
	var out bytes.Buffer
	info, err := retagSave(bytes.NewReader(in), &out, "bf-mine-coder-snap:5")
	if err != nil {
		t.Fatal(err)
	}
	if info.configDigest != "sha256:1234abcd" {
		t.Errorf("config digest %q", info.configDigest)
	}
	tr := tar.NewReader(&out)
	got := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[hdr.Name] = string(data)
	}
	if _, ok := got["repositories"]; ok {
		t.Error("the repositories file (the original tags) was kept")
	}
	if got["abc/layer.tar"] != layer || got["1234abcd.json"] != files["1234abcd.json"] || got["trailing/extra"] != "x" {
		t.Error("other entries changed")
	}
	var m []map[string]any
	if err := json.Unmarshal([]byte(got["manifest.json"]), &m); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(m[0]["RepoTags"]) != "[bf-mine-coder-snap:5]" || m[0]["Config"] != "1234abcd.json" || fmt.Sprint(m[0]["Layers"]) != "[abc/layer.tar]" {
		t.Errorf("manifest %v", m)
	}

	for name, c := range map[string]struct {
		tar  []byte
		want string
	}{
		"not a tar":   {[]byte(strings.Repeat("garbage!", 200)), "is it a docker save tar"},
		"no manifest": {saveTar(t, map[string]string{"a": "b"}, []string{"a"}), "no manifest.json"},
		"two images":  {saveTar(t, map[string]string{"manifest.json": `[{"Config":"a.json"},{"Config":"b.json"}]`}, []string{"manifest.json"}), "holds 2 images"},
	} {
		_, err := retagSave(bytes.NewReader(c.tar), io.Discard, "x:1")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}

// snapFake is a fake engine for snapshot operations.
type snapFake struct {
	*fakeAPI
	mu       sync.Mutex
	images   map[string]image.InspectResponse // by id and by tag
	removeFn func(ref string, o image.RemoveOptions) error
	// commitErr, when set, is what ContainerCommit answers.
	commitErr error
	commits   int
	imports   []string // changes of each import
	loaded    []string // configs loaded
	paused    int
}

var _ snapshotAPI = (*snapFake)(nil)

func (f *snapFake) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	f.record("ImageInspect " + ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.images[ref]; ok {
		return img, nil
	}
	return image.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("no such image " + ref)
}

func (f *snapFake) ImageRemove(_ context.Context, ref string, o image.RemoveOptions) ([]image.DeleteResponse, error) {
	f.record(fmt.Sprintf("ImageRemove %s force=%t", ref, o.Force))
	if f.removeFn != nil {
		return nil, f.removeFn(ref, o)
	}
	return nil, nil
}

func (f *snapFake) ContainerInspectWithRaw(context.Context, string, bool) (container.InspectResponse, []byte, error) {
	return container.InspectResponse{}, nil, unexpected("ContainerInspectWithRaw")
}

func (f *snapFake) ContainerCommit(_ context.Context, id string, o container.CommitOptions) (container.CommitResponse, error) {
	f.record("ContainerCommit ref=" + o.Reference)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits++
	if f.commitErr != nil {
		return container.CommitResponse{}, f.commitErr
	}
	img := withLabels(image.InspectResponse{ID: "sha256:committed", Architecture: "amd64", Os: "linux"}, o.Config.Labels)
	img.RootFS.Layers = append(slices.Clone(f.images["sha256:base"].RootFS.Layers), "sha256:new")
	f.images[img.ID] = img
	return container.CommitResponse{ID: img.ID}, nil
}

func (f *snapFake) ContainerExport(context.Context, string) (io.ReadCloser, error) {
	f.record("ContainerExport")
	return io.NopCloser(strings.NewReader("rootfs")), nil
}

func (f *snapFake) ContainerPause(context.Context, string) error {
	f.record("ContainerPause")
	f.paused++
	return nil
}

func (f *snapFake) ContainerUnpause(context.Context, string) error {
	f.record("ContainerUnpause")
	f.paused--
	return nil
}

func (f *snapFake) ImageImport(_ context.Context, src image.ImportSource, ref string, o image.ImportOptions) (io.ReadCloser, error) {
	f.record("ImageImport ref=" + ref)
	data, _ := io.ReadAll(src.Source)
	if string(data) != "rootfs" {
		return nil, fmt.Errorf("import got %q, not the export", data)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imports = append(f.imports, strings.Join(o.Changes, "\n"))
	img := image.InspectResponse{ID: "sha256:flat", Architecture: "amd64", Os: "linux"}
	img.RootFS.Layers = []string{"sha256:flat"}
	f.images[img.ID] = img
	return io.NopCloser(strings.NewReader(`{"status":"sha256:flat"}`)), nil
}

func (f *snapFake) ImageSave(context.Context, []string, ...client.ImageSaveOption) (io.ReadCloser, error) {
	return nil, unexpected("ImageSave")
}

// ImageLoad reads a tar of a manifest and a config, as loadImageConfig
// writes it, and tags the image the config makes.
func (f *snapFake) ImageLoad(_ context.Context, r io.Reader, _ ...client.ImageLoadOption) (image.LoadResponse, error) {
	f.record("ImageLoad")
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return image.LoadResponse{}, err
		}
		files[hdr.Name], _ = io.ReadAll(tr)
	}
	var m []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil || len(m) != 1 {
		return image.LoadResponse{}, fmt.Errorf("bad manifest %s: %v", files["manifest.json"], err)
	}
	cfg := files[m[0].Config]
	var c struct {
		Config struct{ Labels map[string]string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(cfg, &c); err != nil || len(c.RootFS.DiffIDs) != len(m[0].Layers) {
		return image.LoadResponse{}, fmt.Errorf("bad config %s: %v", cfg, err)
	}
	sum := sha256.Sum256(cfg)
	img := withLabels(image.InspectResponse{ID: "sha256:" + hex.EncodeToString(sum[:]), RepoTags: m[0].RepoTags, Created: time.Now().Format(time.RFC3339Nano)}, c.Config.Labels)
	img.RootFS.Layers = c.RootFS.DiffIDs
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loaded = append(f.loaded, string(cfg))
	f.images[img.ID] = img
	for _, tag := range m[0].RepoTags {
		f.images[tag] = img
	}
	return image.LoadResponse{Body: io.NopCloser(strings.NewReader(`{"stream":"Loaded image"}`))}, nil
}

// withLabels gives an image config with these labels (through JSON, so as
// to name no config type of the engine's API).
func withLabels(img image.InspectResponse, l map[string]string) image.InspectResponse {
	data, _ := json.Marshal(map[string]any{"Config": map[string]any{"Labels": l}})
	if err := json.Unmarshal(data, &img); err != nil {
		panic(err)
	}
	return img
}

func newSnapFake(t *testing.T, lineage string, baseLayers int, flattenDepth int) (*Driver, *snapFake) {
	t.Helper()
	base := image.InspectResponse{ID: "sha256:base"}
	base.RootFS.Layers = make([]string, baseLayers)
	f := &snapFake{fakeAPI: &fakeAPI{}, images: map[string]image.InspectResponse{"sha256:base": base}}
	name := "bf-" + drivers.LineagePrefix(lineage) + "-coder"
	f.ContainerInspectFn = func(ref string) (container.InspectResponse, error) {
		if ref != name {
			return container.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("no such container " + ref)
		}
		r := container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: "ctr1", Image: "sha256:base", State: &container.State{Running: true}},
			Config: &container.Config{Cmd: []string{"sleep", "1"}, Labels: map[string]string{drivers.LabelLineage: lineage}}}
		return r, nil
	}
	f.ImageListFn = func(image.ListOptions) ([]image.Summary, error) { return nil, nil }
	d := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { return f, nil })
	cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "flatten_depth": cty.NumberIntVal(int64(flattenDepth))})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "test", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	return d, f
}

func snapshotObject(addr, agent string) drivers.Object {
	return drivers.Object{Addr: addr, Kind: drivers.KindSnapshot, Attrs: map[string]cty.Value{
		"agent": cty.StringVal(agent), "description": cty.NullVal(cty.String),
		"triggers": cty.NullVal(cty.Map(cty.String)), "policy": cty.True,
	}}
}

// TestCreateSnapshotFlattenDecision: below the threshold a snapshot is a
// paused, untagged commit; at it, the container is paused, exported and
// imported, never committed. Either way the intermediate's layers are
// loaded with a config written from the base image, tagged, and the
// intermediate is removed.
func TestCreateSnapshotFlattenDecision(t *testing.T) {
	const lineage = "12345678-0000-0000-0000-000000000000"
	agent := &drivers.AgentSpec{Addr: "agent.coder", Name: "coder", Workload: drivers.MustWorkload(map[string]cty.Value{"command": strList("sleep", "2"), "workdir": cty.StringVal("/w")})}
	req := drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snapshotObject("agent.coder.snapshot.4", "agent.coder"), Hash: "h", Agent: agent}

	d, f := newSnapFake(t, lineage, 3, 5) // 3 layers + 1 < 5: commit
	resp, err := d.Apply(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if f.commits != 1 || len(f.imports) != 0 || len(f.loaded) != 1 {
		t.Fatalf("commits %d, imports %d, loads %d: want one commit and one load", f.commits, len(f.imports), len(f.loaded))
	}
	calls := strings.Join(f.calls(), "\n")
	for _, want := range []string{"ContainerCommit ref=\n", "ImageLoad", "ImageRemove sha256:committed force=true"} {
		if !strings.Contains(calls+"\n", want) {
			t.Errorf("calls lack %q:\n%s", want, calls)
		}
	}
	if strings.Contains(f.loaded[0], "sleep") || strings.Contains(f.loaded[0], "/w") {
		t.Errorf("the loaded config holds the agent's declared config:\n%s", f.loaded[0])
	}
	if !strings.HasPrefix(resp.ID, "sha256:") || resp.ID == "sha256:committed" || resp.Snapshot.Image != "bf-12345678-coder-snap:4" || resp.Snapshot.Source != "ctr1" || resp.Computed["depth"] != "4" {
		t.Errorf("response %+v", resp)
	}
	if resp.Snapshot.Created.IsZero() {
		t.Errorf("created %v", resp.Snapshot.Created)
	}
	labels := f.images[resp.ID].Config.Labels
	for k, v := range map[string]string{drivers.LabelLineage: lineage, drivers.LabelAddress: "agent.coder.snapshot.4", drivers.LabelConfigHash: "h", labelSnapshotOf: "agent.coder", labelSnapshotSource: "ctr1"} {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, labels[k], v)
		}
	}
	if l := f.images["sha256:committed"].Config.Labels; l[drivers.LabelLineage] != lineage || l[drivers.LabelAddress] != "agent.coder.snapshot.4" || l[labelSnapshotIntermediate] != lineage {
		t.Errorf("intermediate labels %v: want the lineage and address, and marked an intermediate", l)
	}

	d, f = newSnapFake(t, lineage, 4, 5) // 4 + 1 reaches 5: flatten
	resp, err = d.Apply(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if f.commits != 0 || len(f.imports) != 1 || f.paused != 0 || len(f.loaded) != 1 {
		t.Fatalf("commits %d, imports %d, loads %d, left paused %d: want one import and the container unpaused", f.commits, len(f.imports), len(f.loaded), f.paused)
	}
	calls = strings.Join(f.calls(), "\n")
	if i, j := strings.Index(calls, "ContainerPause"), strings.Index(calls, "ContainerExport"); i < 0 || j < i || !strings.Contains(calls, "ContainerUnpause") {
		t.Errorf("want pause, export, unpause:\n%s", calls)
	}
	if !strings.Contains(calls, "ImageImport ref=\n") || !strings.Contains(calls, "ImageRemove sha256:flat force=true") {
		t.Errorf("want an untagged import, removed after the load:\n%s", calls)
	}
	if f.imports[0] != "LABEL "+labelSnapshotIntermediate+"="+lineage+" "+drivers.LabelLineage+"="+lineage+" "+drivers.LabelAddress+`="agent.coder.snapshot.4"` {
		t.Errorf("import changes %q", f.imports[0])
	}
	if resp.Computed["depth"] != "1" {
		t.Errorf("response %+v", resp)
	}

	// The image the container runs is gone (removed by hand): its depth is
	// unknown, so the snapshot is flattened, which needs no base image.
	d, f = newSnapFake(t, lineage, 1, 100)
	delete(f.images, "sha256:base")
	if _, err := d.Apply(t.Context(), req); err != nil || len(f.imports) != 1 || f.commits != 0 {
		t.Errorf("with the base image gone: err %v, imports %d, commits %d", err, len(f.imports), f.commits)
	}

	// No container: a clear error.
	req.Object = snapshotObject("agent.other.snapshot.1", "agent.other")
	if _, err := d.Apply(t.Context(), req); err == nil || !strings.Contains(err.Error(), "agent.other has no container") {
		t.Errorf("snapshot of a missing container: %v", err)
	}
}

// TestDeleteSnapshotTolerates: deleting a snapshot removes its tags;
// an image that children or a container still use is only untagged by the
// engine (a conflict when removed by id), which is no error, nor is an
// image already gone. Another state's image is never touched.
func TestDeleteSnapshotTolerates(t *testing.T) {
	const lineage = "12345678-0000-0000-0000-000000000000"
	mk := func(id string, tags []string, lin string) image.InspectResponse {
		return withLabels(image.InspectResponse{ID: id, RepoTags: tags}, map[string]string{drivers.LabelLineage: lin})
	}
	del := func(d *Driver, id string) error {
		_, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: id, Object: drivers.Object{Addr: "agent.coder.snapshot.1", Kind: drivers.KindSnapshot}})
		return err
	}
	conflict := cerrdefs.ErrConflict.WithMessage("conflict: unable to delete (cannot be forced) - image has dependent child images")

	d, f := newSnapFake(t, lineage, 1, 100)
	f.images["sha256:a"] = mk("sha256:a", []string{"bf-12345678-coder-snap:1", "someone/else:1"}, lineage)
	f.removeFn = func(string, image.RemoveOptions) error { return nil }
	if err := del(d, "sha256:a"); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(f.calls(), "\n")
	if !strings.Contains(calls, "ImageRemove bf-12345678-coder-snap:1 force=true") || strings.Contains(calls, "someone/else") || strings.Contains(calls, "ImageRemove sha256:a") {
		t.Errorf("want only our tag removed:\n%s", calls)
	}
	if !strings.Contains(calls, "ImageList") {
		t.Errorf("no sweep of untagged snapshot images:\n%s", calls)
	}

	// Untagged already (children kept it): removed by id; the children's
	// conflict is no error.
	d, f = newSnapFake(t, lineage, 1, 100)
	f.images["sha256:b"] = mk("sha256:b", nil, lineage)
	f.removeFn = func(ref string, o image.RemoveOptions) error {
		if ref != "sha256:b" || o.Force {
			return fmt.Errorf("unexpected removal of %s (force %t)", ref, o.Force)
		}
		return conflict
	}
	if err := del(d, "sha256:b"); err != nil {
		t.Errorf("a conflict blocked the delete: %v", err)
	}

	// Gone already.
	d, _ = newSnapFake(t, lineage, 1, 100)
	if err := del(d, "sha256:gone"); err != nil {
		t.Errorf("deleting a missing image: %v", err)
	}

	// Another state's image: refused, untouched.
	d, f = newSnapFake(t, lineage, 1, 100)
	f.images["sha256:c"] = mk("sha256:c", []string{"bf-12345678-coder-snap:1"}, "other-lineage")
	if err := del(d, "sha256:c"); err == nil || !strings.Contains(err.Error(), "does not belong to this state") {
		t.Errorf("deleting another state's image: %v", err)
	}
	if strings.Contains(strings.Join(f.calls(), "\n"), "ImageRemove sha") {
		t.Error("another state's image was removed")
	}

	// A real failure is reported.
	d, f = newSnapFake(t, lineage, 1, 100)
	f.images["sha256:d"] = mk("sha256:d", []string{"bf-12345678-coder-snap:1"}, lineage)
	f.removeFn = func(string, image.RemoveOptions) error { return errors.New("disk on fire") }
	if err := del(d, "sha256:d"); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("a failing removal: %v", err)
	}
}

// ---- real engine ----

// snapEngine is a driver on the real engine through the plain client
// (snapshots need more of the API than the counting wrapper has).
type snapEngine struct {
	t       *testing.T
	d       *Driver
	cli     *client.Client
	lineage string
	image   string
}

func newSnapEngine(t *testing.T, flattenDepth int64) *snapEngine {
	t.Helper()
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	lineage := dockertest.NewLineage()
	dockertest.Cleanup(t, cli, lineage)
	t.Cleanup(func() { removeSnapshotImages(t, cli, lineage) }) // children first, before Cleanup
	d := newDriver(testLogger(t), newClient)
	cfg := cty.ObjectVal(map[string]cty.Value{
		"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool),
		"flatten_depth": cty.NumberIntVal(flattenDepth),
	})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "default", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &snapEngine{t: t, d: d, cli: cli, lineage: lineage, image: img}
}

// removeSnapshotImages removes a lineage's containers, then its images
// child first (an image with children cannot be removed before them).
// legacyFields are what API 1.41 reports of an image only in fields the
// client marks deprecated: read from the raw inspect JSON instead.
type legacyFields struct {
	Parent    string
	Container string
}

func legacyImage(t *testing.T, cli *client.Client, id string) legacyFields {
	t.Helper()
	var raw bytes.Buffer
	if _, err := cli.ImageInspect(t.Context(), id, client.ImageInspectWithRawResponse(&raw)); err != nil {
		t.Fatal(err)
	}
	var f legacyFields
	if err := json.Unmarshal(raw.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func removeSnapshotImages(t *testing.T, cli *client.Client, lineage string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = dockertest.RemoveLineage(ctx, cli, lineage) // containers and networks; images may conflict
	for range 20 {
		if err := dockertest.RemoveLineage(ctx, cli, lineage); err == nil {
			return
		}
	}
	if err := dockertest.RemoveLineage(ctx, cli, lineage); err != nil {
		t.Errorf("cleaning up lineage %s: %v", lineage, err)
	}
}

func (e *snapEngine) apply(req drivers.ApplyRequest) drivers.ApplyResponse {
	e.t.Helper()
	req.Lineage = e.lineage
	if req.Hash == "" {
		req.Hash = "hash-of-" + req.Object.Addr
	}
	resp, err := e.d.Apply(e.t.Context(), req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Op, req.Object.Addr, err)
	}
	return resp
}

func (e *snapEngine) agentSpec(name string) *drivers.AgentSpec {
	return &drivers.AgentSpec{
		Addr: "agent." + name,
		Name: name,
		Workload: drivers.MustWorkload(map[string]cty.Value{
			"image":   cty.StringVal(e.image),
			"command": strList("sleep", "600"),
			"env":     cty.MapVal(map[string]cty.Value{"ROLE": cty.StringVal("snap"), "Q": cty.StringVal(`a "b" $c \d`)}),
			"workdir": cty.StringVal("/workspace"),
		}),
	}
}

// agentObjects are a network and a container for an agent, as Plan makes
// them, without the gateway (whose binary a test process does not have).
func agentObjects(a *drivers.AgentSpec) (drivers.Object, drivers.Object) {
	netAddr := a.Addr + ".network"
	return drivers.Object{Addr: netAddr, Kind: kindNetwork, Attrs: map[string]cty.Value{"internal": cty.True}},
		drivers.Object{Addr: a.Addr, Kind: kindContainer, Workload: true, DependsOn: []string{netAddr}, Attrs: map[string]cty.Value{
			"image": drivers.WorkloadAttr(a.Workload, "image"), "command": drivers.WorkloadAttr(a.Workload, "command"), "env": drivers.WorkloadAttr(a.Workload, "env"), "workdir": drivers.WorkloadAttr(a.Workload, "workdir"), "network": cty.StringVal(netAddr),
		}}
}

// run starts an agent and returns its container id.
func (e *snapEngine) run(a *drivers.AgentSpec, boot string) (netID, ctrID string) {
	e.t.Helper()
	netObj, ctrObj := agentObjects(a)
	n := e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: netObj})
	c := e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj, BootImage: boot})
	return n.ID, c.ID
}

func (e *snapEngine) snapshot(a *drivers.AgentSpec, addr string) drivers.ApplyResponse {
	e.t.Helper()
	return e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: snapshotObject(addr, a.Addr), Agent: a})
}

func lineageFilter(lineage string) filters.Args {
	return filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))
}

// TestIntegrationSnapshotCommitAndFlatten takes the same container's
// snapshot as a commit and as a flattened import: both hold what it wrote,
// both boot as the agent is declared (the flattened one has the config
// re-applied, quoting and all), Read lists both as snapshots, and a
// container boots from each.
func TestIntegrationSnapshotCommitAndFlatten(t *testing.T) {
	t.Parallel()
	e := newSnapEngine(t, 100)
	a := e.agentSpec("coder")
	_, ctrID := e.run(a, "")
	dockertest.Sh(t, e.cli, ctrID, "echo hi > /workspace/f; head -c 300000 /dev/zero > /workspace/zeros")

	// On a storage driver that sizes a layer by reading every file,
	// Written says so and reads nothing; measured anyway, it is the size.
	obj := drivers.LiveObject{Addr: a.Addr, Kind: kindContainer, ID: ctrID, Created: time.Now()}
	api, _, err := e.d.engine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := e.d.writesMeasurable(t.Context(), api); !ok {
		w, err := e.d.Written(t.Context(), e.lineage, obj)
		if err != nil || w.Unmeasured != why || w.Bytes != 0 || !w.Since.Equal(obj.Created) {
			t.Errorf("Written on an engine that does not measure = %+v, %v: want the reason %q and the creation time", w, err, why)
		}
		measureWrites(e.d)
	}
	w, err := e.d.Written(t.Context(), e.lineage, obj)
	if err != nil || w.Unmeasured != "" || w.Bytes < 300000 || time.Since(w.Since) > time.Hour {
		t.Errorf("Written = %+v, %v: want at least the 300 kB written and the creation time", w, err)
	}

	a.Workload = drivers.WithWorkloadAttr(a.Workload, "command", strList("sleep", "601")) // declared now: the image boots like this
	committed := e.snapshot(a, "agent.coder.snapshot.1")
	flat := newSnapEngine(t, 1) // every snapshot flattens
	flat.lineage = e.lineage
	flattened := flat.snapshot(a, "agent.coder.snapshot.2")
	if committed.Computed["depth"] != "2" || flattened.Computed["depth"] != "1" {
		t.Errorf("depths %s and %s, want 2 (commit) and 1 (flattened)", committed.Computed["depth"], flattened.Computed["depth"])
	}
	var infos []image.InspectResponse
	for _, r := range []drivers.ApplyResponse{committed, flattened} {
		ref := r.Snapshot.Image
		info, err := e.cli.ImageInspect(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if info.ID != r.ID || r.Snapshot.Source != ctrID {
			t.Errorf("%s: computed %v, image id %s", ref, r.Computed, info.ID)
		}
		infos = append(infos, info)
		if got := dockertest.RunImage(t, e.cli, ref, "cat", "/workspace/f"); got != "hi\n" {
			t.Errorf("%s: /workspace/f = %q", ref, got)
		}
	}
	base, err := e.cli.ImageInspect(t.Context(), e.image)
	if err != nil {
		t.Fatal(err)
	}
	// A commit's size is what it adds over its base image (the 300 kB
	// written, and little more); a flattened one shares no layer with
	// it, so its size is its whole image.
	if got := committed.Snapshot.Size; got != infos[0].Size-base.Size || got < 300000 || got > 400000 {
		t.Errorf("committed snapshot size %d, want %d - %d (what the commit added, about 300 kB)", got, infos[0].Size, base.Size)
	}
	if got := flattened.Snapshot.Size; got != infos[1].Size {
		t.Errorf("flattened snapshot size %d, want its whole image's %d", got, infos[1].Size)
	}
	for i, info := range infos {
		c := info.Config
		// The base image's config, none of the agent's: that is applied
		// again at create.
		if !slices.Equal(c.Cmd, base.Config.Cmd) || c.WorkingDir != base.Config.WorkingDir || !slices.Equal(c.Env, base.Config.Env) {
			t.Errorf("image %d config: cmd %q workdir %q env %q, want the base image's (%q %q %q)", i, c.Cmd, c.WorkingDir, c.Env, base.Config.Cmd, base.Config.WorkingDir, base.Config.Env)
		}
		if old := legacyImage(t, e.cli, info.ID); old.Parent != "" || old.Container != "" {
			t.Errorf("image %d has parent %q, container %q: want neither", i, old.Parent, old.Container)
		}
		if c.Labels[labelSnapshotOf] != "agent.coder" || c.Labels[drivers.LabelLineage] != e.lineage || c.Labels[labelSnapshotSource] != ctrID {
			t.Errorf("image %d labels %v", i, c.Labels)
		}
	}
	if !slices.Equal(infos[0].Config.Env, infos[1].Config.Env) {
		t.Errorf("env differs between commit and flatten:\n%q\n%q", infos[0].Config.Env, infos[1].Config.Env)
	}

	live, err := e.d.Read(t.Context(), drivers.ReadRequest{Lineage: e.lineage})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, o := range live.Objects {
		kinds[o.Addr] = o.Kind + " " + o.Name
	}
	if kinds["agent.coder.snapshot.1"] != "snapshot "+committed.Snapshot.Image || kinds["agent.coder.snapshot.2"] != "snapshot "+flattened.Snapshot.Image || kinds["agent.coder"] != "container bf-"+e.lineage[:8]+"-coder" {
		t.Errorf("Read: %v", kinds)
	}

	// Boot from the flattened snapshot.
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: ctrID, Object: drivers.Object{Addr: a.Addr, Kind: kindContainer}})
	_, ctrObj := agentObjects(a)
	c := e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj, BootImage: flattened.Snapshot.Image})
	if got := dockertest.Sh(t, e.cli, c.ID, "cat /workspace/f"); got != "hi\n" {
		t.Errorf("the container booted from the snapshot has /workspace/f = %q", got)
	}
	if got := dockertest.Sh(t, e.cli, c.ID, `echo "$ROLE $Q $PWD"`); got != `snap a "b" $c \d /workspace`+"\n" {
		t.Errorf("the container booted from the snapshot has env and workdir %q: want the agent's as declared", got)
	}
	if ci, err := e.cli.ContainerInspect(t.Context(), c.ID); err != nil || fmt.Sprint(ci.Config.Cmd) != "[sleep 601]" {
		t.Errorf("the container booted from the snapshot runs %v (%v): want the declared command", ci.Config, err)
	}
}

// TestIntegrationSnapshotDeleteWhileInUse: a snapshot of a container
// booted from an earlier snapshot has no parent (it shares the layers
// only); the earlier one, deleted while the container runs from it, is
// only untagged, the later one keeps working, and deleting that one and
// the container leaves nothing.
func TestIntegrationSnapshotDeleteWhileInUse(t *testing.T) {
	t.Parallel()
	e := newSnapEngine(t, 100)
	a := e.agentSpec("chain")
	netID, ctrID := e.run(a, "")
	dockertest.Sh(t, e.cli, ctrID, "echo one > /workspace/f")
	s1 := e.snapshot(a, "agent.chain.snapshot.1")
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: ctrID, Object: drivers.Object{Addr: a.Addr, Kind: kindContainer}})
	_, ctrObj := agentObjects(a)
	ctrID = e.apply(drivers.ApplyRequest{Op: drivers.OpCreate, Object: ctrObj, BootImage: s1.Snapshot.Image}).ID
	dockertest.Sh(t, e.cli, ctrID, "echo two >> /workspace/f")
	s2 := e.snapshot(a, "agent.chain.snapshot.2")
	info, _ := e.cli.ImageInspect(t.Context(), s2.ID)
	//lint:ignore SA1019 API 1.41 reports an image's parent only in this field
	if parent := info.Parent; parent != "" || s2.Computed["depth"] != "3" {
		t.Fatalf("snapshot 2's parent is %q, depth %s: want none, and 3 layers", parent, s2.Computed["depth"])
	}

	del := func(addr, id string) {
		t.Helper()
		e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: id, Object: drivers.Object{Addr: addr, Kind: drivers.KindSnapshot}})
	}
	del("agent.chain.snapshot.1", s1.ID) // a running container: untagged only
	if _, err := e.cli.ImageInspect(t.Context(), s1.Snapshot.Image); !cerrdefs.IsNotFound(err) {
		t.Errorf("snapshot 1's reference is still there: %v", err)
	}
	if _, err := e.cli.ImageInspect(t.Context(), s1.ID); err != nil {
		t.Errorf("snapshot 1's image went while a container runs from it: %v", err)
	}
	live, _ := e.d.Read(t.Context(), drivers.ReadRequest{Lineage: e.lineage})
	for _, o := range live.Objects {
		if o.Addr == "agent.chain.snapshot.1" {
			t.Errorf("Read still lists the deleted snapshot: %+v", o)
		}
	}
	if got := dockertest.RunImage(t, e.cli, s2.Snapshot.Image, "cat", "/workspace/f"); got != "one\ntwo\n" {
		t.Errorf("snapshot 2 after deleting its parent: /workspace/f = %q", got)
	}
	del("agent.chain.snapshot.1", s1.ID) // again: still no error
	del("agent.chain.snapshot.2", s2.ID)
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: ctrID, Object: drivers.Object{Addr: a.Addr, Kind: kindContainer}})
	e.apply(drivers.ApplyRequest{Op: drivers.OpDelete, ID: netID, Object: drivers.Object{Addr: a.Addr + ".network", Kind: kindNetwork}})
	e.d.sweepPending(t.Context(), e.mustAPI()) // a sweep skipped while another test made an image runs at Close
	imgs, err := e.cli.ImageList(t.Context(), image.ListOptions{All: true, Filters: lineageFilter(e.lineage)})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		t.Errorf("left behind: image %s %v", shortID(img.ID), img.RepoTags)
	}
}

// TestIntegrationSnapshotTransfer: a snapshot exported from one state and
// imported into another on the same engine gets the new state's labels
// and reference (loaded again with a config written for it: no new layer,
// no parent, and the image as imported gone), Read of the new state lists
// it, and the original keeps its own tag.
func TestIntegrationSnapshotTransfer(t *testing.T) {
	t.Parallel()
	e := newSnapEngine(t, 100)
	a := e.agentSpec("mover")
	_, ctrID := e.run(a, "")
	dockertest.Sh(t, e.cli, ctrID, "echo moved > /workspace/f")
	s := e.snapshot(a, "agent.mover.snapshot.1")

	var tarball bytes.Buffer
	if err := e.d.ExportSnapshot(t.Context(), s.Snapshot.Image, &tarball); err != nil {
		t.Fatal(err)
	}
	if err := e.d.ExportSnapshot(t.Context(), "bf-nothere-x-snap:1", io.Discard); err == nil || !strings.Contains(err.Error(), "not on the engine") {
		t.Errorf("exporting a missing image: %v", err)
	}

	other := newSnapEngine(t, 100)
	obj := snapshotObject("agent.mover.snapshot.7", "agent.mover")
	resp, err := other.d.ImportSnapshot(t.Context(), drivers.ImportRequest{Lineage: other.lineage, Object: obj, Hash: "h7"}, bytes.NewReader(tarball.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	wantRef := "bf-" + other.lineage[:8] + "-mover-snap:7"
	if resp.Snapshot.Image != wantRef || resp.Snapshot.Source != ctrID || resp.Snapshot.Taken.IsZero() || resp.Computed["depth"] != "2" {
		t.Errorf("import computed %v", resp.Computed)
	}
	info, err := e.cli.ImageInspect(t.Context(), wantRef)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{drivers.LabelLineage: other.lineage, drivers.LabelAddress: "agent.mover.snapshot.7", drivers.LabelConfigHash: "h7", labelSnapshotOf: "agent.mover"} {
		if info.Config.Labels[k] != v {
			t.Errorf("imported label %s = %q, want %q", k, info.Config.Labels[k], v)
		}
	}
	if info.ID != resp.ID {
		t.Errorf("import id %s, image %s", resp.ID, info.ID)
	}
	if parent := legacyImage(t, e.cli, info.ID).Parent; parent != "" || info.Config.Labels[labelSnapshotSource] != ctrID {
		t.Errorf("imported image: parent %q, labels %v", parent, info.Config.Labels)
	}
	if imgs, err := e.cli.ImageList(t.Context(), image.ListOptions{All: true, Filters: lineageFilter(e.lineage)}); err != nil || len(imgs) != 1 {
		t.Errorf("%d images of the exporting lineage (%v): want its snapshot only, not the image as imported", len(imgs), err)
	}
	if got := dockertest.RunImage(t, e.cli, wantRef, "cat", "/workspace/f"); got != "moved\n" {
		t.Errorf("imported image: /workspace/f = %q", got)
	}
	orig, err := e.cli.ImageInspect(t.Context(), s.Snapshot.Image)
	if err != nil || orig.ID != s.ID {
		t.Errorf("the original snapshot lost its tag: %v %s", err, orig.ID)
	}
	live, err := other.d.Read(t.Context(), drivers.ReadRequest{Lineage: other.lineage})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.Objects) != 1 || live.Objects[0].Addr != "agent.mover.snapshot.7" || live.Objects[0].Kind != drivers.KindSnapshot || live.Objects[0].Hash != "h7" {
		t.Errorf("Read of the importing state: %+v", live.Objects)
	}

	// The same stream imported at the same address of the same lineage (a
	// migration's move) needs no relabelling: the image id is kept.
	obj1 := snapshotObject("agent.mover.snapshot.1", "agent.mover")
	again, err := e.d.ImportSnapshot(t.Context(), drivers.ImportRequest{Lineage: e.lineage, Object: obj1, Hash: "hash-of-agent.mover.snapshot.1"}, bytes.NewReader(tarball.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != s.ID {
		t.Errorf("re-importing the snapshot where it was taken changed its id: %s -> %s", s.ID, again.ID)
	}

	if _, err := other.d.ImportSnapshot(t.Context(), drivers.ImportRequest{Lineage: other.lineage, Object: obj, Hash: "h"}, strings.NewReader("not a tar at all, not at all, not at all")); err == nil {
		t.Error("importing garbage succeeded")
	}
}

// TestSweepTakesOnlyLeftovers: a sweep removes untagged images of its
// lineage, snapshot intermediates only once they are clearly old, and a
// build's leftovers (no lineage label; stopped containers only), never
// anything tagged, and never prunes for the first two kinds.
func TestSweepTakesOnlyLeftovers(t *testing.T) {
	const lineage = "12345678-0000-0000-0000-000000000000"
	d, f := newSnapFake(t, lineage, 1, 100)
	old, fresh := time.Now().Add(-time.Hour).Unix(), time.Now().Unix()
	f.ImageListFn = func(o image.ListOptions) ([]image.Summary, error) {
		switch {
		case o.Filters.ExactMatch("label", drivers.LabelLineage+"="+lineage):
			return []image.Summary{
				{ID: "sha256:untagged", Labels: map[string]string{drivers.LabelLineage: lineage}},
				{ID: "sha256:tagged", RepoTags: []string{"bf-12345678-x-snap:1"}, Labels: map[string]string{drivers.LabelLineage: lineage}},
			}, nil
		case o.Filters.ExactMatch("label", labelSnapshotIntermediate+"="+lineage):
			return []image.Summary{{ID: "sha256:old-inter", Created: old}, {ID: "sha256:fresh-inter", Created: fresh}}, nil
		case o.Filters.ExactMatch("label", labelBuildOf+"="+lineage):
			return []image.Summary{
				{ID: "sha256:step", Labels: map[string]string{labelBuildOf: lineage}},
				{ID: "sha256:built", Labels: map[string]string{labelBuildOf: lineage, drivers.LabelLineage: lineage}},
			}, nil
		}
		return nil, fmt.Errorf("unexpected list %v", o.Filters)
	}
	f.ContainerListFn = func(container.ListOptions) ([]container.Summary, error) {
		return []container.Summary{
			{ID: "builder", State: container.StateExited},
			{ID: "running-builder", State: container.StateRunning},
			{ID: "agent", State: container.StateExited, Labels: map[string]string{drivers.LabelLineage: lineage}},
		}, nil
	}
	var removed []string
	var mu sync.Mutex
	f.removeFn = func(ref string, o image.RemoveOptions) error {
		mu.Lock()
		defer mu.Unlock()
		removed = append(removed, fmt.Sprintf("%s force=%t prune=%t", ref, o.Force, o.PruneChildren))
		return nil
	}
	f.ContainerRemoveFn = func(id string, _ container.RemoveOptions) error {
		mu.Lock()
		defer mu.Unlock()
		removed = append(removed, "container "+id)
		return nil
	}
	api, _, _ := d.engine(t.Context())
	d.sweepSnapshots(t.Context(), api, lineage)
	want := []string{"sha256:untagged force=false prune=false", "sha256:old-inter force=true prune=false", "container builder", "sha256:step force=false prune=true"}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}

	// While an image is being made, the sweep waits for Close.
	removed = nil
	imageMaking.RLock()
	d.sweepSnapshots(t.Context(), api, lineage)
	imageMaking.RUnlock()
	if len(removed) != 0 {
		t.Errorf("a sweep ran while an image was being made: %q", removed)
	}
	d.sweepPending(t.Context(), api)
	if !slices.Equal(removed, want) {
		t.Errorf("the pending sweep removed %q, want %q", removed, want)
	}
}

// TestIntermediateHoldsNoSecret: on the real engine, a commit given
// intermediateEnv holds none of the container's environment values (the
// engine adds the container's variables to those given, so each is given
// empty); without it the intermediate, which a killed apply may leave,
// would hold the secret.
func TestIntermediateHoldsNoSecret(t *testing.T) {
	const secret = "sk-intermediate-5e1d"
	cli := dockertest.Client(t)
	ctx := t.Context()
	lineage := dockertest.NewLineage()
	dockertest.Cleanup(t, cli, lineage)
	img := dockertest.BusyboxImage(t, cli)
	labels := map[string]string{drivers.LabelLineage: lineage, drivers.LabelAddress: "agent.x"}
	ctr, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sleep", "60"}, Env: []string{"API_KEY=" + secret}, Labels: labels}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), ctr.ID, container.RemoveOptions{Force: true}) })
	env := []string{"API_KEY=" + secret, "PATH=/bin"}
	for _, tc := range []struct {
		name string
		env  []string
		want bool
	}{{"with intermediateEnv", intermediateEnv(env), false}, {"without", nil, true}} {
		resp, err := cli.ContainerCommit(ctx, ctr.ID, container.CommitOptions{Config: &container.Config{Labels: intermediateLabels(labels, lineage, "agent.x.snapshot.1"), Env: tc.env}})
		if err != nil {
			t.Fatal(err)
		}
		info, err := cli.ImageInspect(ctx, resp.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = cli.ImageRemove(context.Background(), resp.ID, image.RemoveOptions{Force: true})
		if got := strings.Contains(strings.Join(info.Config.Env, " "), secret); got != tc.want {
			t.Errorf("%s: the intermediate's env %v holds the secret: %v, want %v", tc.name, info.Config.Env, got, tc.want)
		}
	}
}
