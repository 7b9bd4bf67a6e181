package docker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// TestCreateNamedTakesOverOwnConflict: a create the engine refuses because
// the lineage's own container of the address took the name meanwhile (the
// create of a killed apply, landed after this one looked) removes that
// one by its id and is made again; the name taken by a container of
// another lineage, or of none, is refused, saying so.
func TestCreateNamedTakesOverOwnConflict(t *testing.T) {
	inUse := cerrdefs.ErrConflict.WithMessage(`Conflict. The container name "/bf-0f1e2d3c-a" is already in use by container "late"`)
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		wantErr string
	}{
		{"own", map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: "agent.a"}, ""},
		{"other lineage", map[string]string{drivers.LabelLineage: "another", drivers.LabelAddress: "agent.a"}, "is not this state's agent.a"},
		{"no lineage", nil, "is not this state's agent.a"},
		{"other address", map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: "agent.b"}, "is not this state's agent.a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var removed []string
			creates := 0
			api := &fakeAPI{
				ContainerInspectFn: func(name string) (container.InspectResponse, error) {
					if len(removed) > 0 {
						return container.InspectResponse{}, cerrdefs.ErrNotFound
					}
					return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: "late"}, Config: &container.Config{Labels: tc.labels}}, nil
				},
				ContainerRemoveFn: func(id string, o container.RemoveOptions) error {
					if !o.Force {
						t.Error("removal not forced")
					}
					removed = append(removed, id)
					return nil
				},
			}
			d := fakeDriver(t, api, DefaultSubnetPool)
			created, err := d.createNamed(t.Context(), api, testLineage, "agent.a", "bf-0f1e2d3c-a", func() (container.CreateResponse, error) {
				creates++
				if len(removed) == 0 {
					return container.CreateResponse{}, inUse
				}
				return container.CreateResponse{ID: "mine"}, nil
			})
			if tc.wantErr == "" {
				if err != nil || created.ID != "mine" || creates != 2 || fmt.Sprint(removed) != "[late]" {
					t.Fatalf("got %+v, %v after %d creates, removed %v: want the late container removed by id and the create made again", created, err, creates, removed)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "remove or rename it") || len(removed) != 0 {
				t.Fatalf("got %v, removed %v: want it refused, naming the name's owner, touching nothing", err, removed)
			}
		})
	}
}

// TestRemoveContainerRetriesRefusal: a removal the storage driver refuses
// is tried again with backoff; one refused every time is said once, with
// what to do; one already in progress is waited out; one gone is no error.
func TestRemoveContainerRetriesRefusal(t *testing.T) {
	defer func(a int, b time.Duration) { removeAttempts, removeBackoff = a, b }(removeAttempts, removeBackoff)
	removeAttempts, removeBackoff = 4, time.Millisecond
	refused := errors.New("Error response from daemon: container 1a2b: driver \"overlay2\" failed to remove root filesystem: unlinkat /var/lib/docker/overlay2/x/merged: directory not empty")

	tries := 0
	api := &fakeAPI{ContainerRemoveFn: func(string, container.RemoveOptions) error {
		tries++
		if tries < 3 {
			return refused
		}
		return nil
	}}
	d := fakeDriver(t, api, DefaultSubnetPool)
	if err := d.removeContainer(t.Context(), api, "1a2b"); err != nil || tries != 3 {
		t.Fatalf("refused twice, then removed: err %v after %d tries", err, tries)
	}

	tries = 0
	api.ContainerRemoveFn = func(string, container.RemoveOptions) error { tries++; return refused }
	err := d.removeContainer(t.Context(), api, "1a2b")
	if err == nil || tries != 4 || !strings.Contains(err.Error(), "directory not empty") || !strings.Contains(err.Error(), "restarting the docker daemon") || strings.Count(err.Error(), "unlinkat") != 1 {
		t.Fatalf("refused every time: %d tries, err %v: want 4 tries and one error saying what to do", tries, err)
	}

	tries = 0
	api.ContainerRemoveFn = func(string, container.RemoveOptions) error {
		tries++
		return errors.New("Error response from daemon: unrecognized ...: device or resource busy")
	}
	if err := d.removeContainer(t.Context(), api, "1a2b"); err == nil || tries != 4 {
		t.Errorf("busy every time: %d tries, err %v", tries, err)
	}

	tries = 0
	api.ContainerRemoveFn = func(string, container.RemoveOptions) error { tries++; return errors.New("boom") }
	if err := d.removeContainer(t.Context(), api, "1a2b"); err == nil || tries != 1 {
		t.Errorf("another error is not retried: %d tries, err %v", tries, err)
	}

	api.ContainerRemoveFn = func(string, container.RemoveOptions) error {
		return errors.New("Error response from daemon: removal of container 1a2b is already in progress")
	}
	inspects := 0
	api.ContainerInspectFn = func(string) (container.InspectResponse, error) {
		inspects++
		if inspects < 2 {
			return container.InspectResponse{}, nil
		}
		return container.InspectResponse{}, cerrdefs.ErrNotFound
	}
	if err := d.removeContainer(t.Context(), api, "1a2b"); err != nil || inspects != 2 {
		t.Errorf("a removal in progress: err %v after %d inspects; want it waited out", err, inspects)
	}
	api.ContainerRemoveFn = func(string, container.RemoveOptions) error { return cerrdefs.ErrNotFound }
	if err := d.removeContainer(t.Context(), api, "1a2b"); err != nil {
		t.Errorf("gone: %v", err)
	}
}

// TestStaleTaskShapes: every shape of a task a crash left is recognised,
// the containerd bundle directory that survived it included.
func TestStaleTaskShapes(t *testing.T) {
	for msg, want := range map[string]bool{
		`Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime create failed: id already in use`: true,
		`Error response from daemon: task 0f1e: already exists`: true,
		`Error response from daemon: failed to start shim: mkdir /run/containerd/io.containerd.runtime.v2.task/moby/0f1e2d3c4b5a: file exists: unknown`:                                              true,
		`Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "nope": executable file not found in $PATH`: false,
		`Error response from daemon: No such container: 0f1e`: false,
	} {
		if got := staleTask(errors.New(msg)); got != want {
			t.Errorf("staleTask(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestReadReportsLeftovers: every image of the lineage is accounted for.
// An intermediate a killed snapshot left, a snapshot image that lost its
// tag and a built image that lost its tags are leftovers, unless a
// container of the lineage runs it or another image is made on it; a
// container being removed, and a builder's container a cut-off build left
// at an image's address, are leftovers too.
func TestReadReportsLeftovers(t *testing.T) {
	lbl := func(addr string, more ...string) map[string]string {
		l := map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: addr}
		for i := 0; i+1 < len(more); i += 2 {
			l[more[i]] = more[i+1]
		}
		return l
	}
	api := &fakeAPI{
		ContainerListFn: func(container.ListOptions) ([]container.Summary, error) {
			return []container.Summary{
				{ID: "c1", Names: []string{"/bf-0f1e2d3c-a"}, State: "running", ImageID: "sha256:runs", Labels: lbl("agent.a")},
				{ID: "c2", Names: []string{"/bf-0f1e2d3c-b"}, State: "removing", ImageID: "sha256:snap-b", Labels: lbl("agent.b")},
				{ID: "c3", Names: []string{"/bf-0f1e2d3c-c"}, State: "dead", ImageID: "sha256:x", Labels: lbl("agent.c")},
				// The classic builder's container of a cut-off build: its
				// steps inherit the labels the build gives the image.
				{ID: "b1", Names: []string{"/objective_keldysh"}, State: "exited", ImageID: "sha256:step", Labels: lbl("agent.c.image", labelBuildOf, testLineage)},
			}, nil
		},
		NetworkListFn: func(network.ListOptions) ([]network.Summary, error) { return nil, nil },
		ImageListFn: func(image.ListOptions) ([]image.Summary, error) {
			return []image.Summary{
				{ID: "sha256:snap", RepoTags: []string{"bf-0f1e2d3c-a-snap:1"}, Labels: lbl("agent.a.snapshot.1", labelSnapshotOf, "agent.a")},
				{ID: "sha256:inter", Labels: lbl("agent.a.snapshot.2", labelSnapshotIntermediate, testLineage), ParentID: "sha256:untagged-parent"},
				{ID: "sha256:lost-tag", Labels: lbl("agent.a.snapshot.3", labelSnapshotOf, "agent.a")},
				{ID: "sha256:runs", Labels: lbl("agent.a.snapshot.4", labelSnapshotOf, "agent.a")},
				{ID: "sha256:untagged-parent", Labels: lbl("agent.a.image")},
				{ID: "sha256:built-untagged", Labels: lbl("agent.b.image")},
			}, nil
		},
	}
	d := fakeDriver(t, api, DefaultSubnetPool)
	resp, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: testLineage})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range resp.Objects {
		s := o.Kind + " " + o.Addr + " " + strings.TrimPrefix(o.ID, "sha256:")
		if o.Leftover != "" {
			s += " leftover"
		}
		got = append(got, s)
	}
	// Not reported: sha256:runs (agent.a runs it) and the untagged parent
	// of the intermediate (kept for it; the sweep after the intermediate
	// goes takes it).
	want := []string{
		"container agent.a c1",
		"snapshot agent.a.snapshot.1 snap",
		"snapshot agent.a.snapshot.2 inter leftover",
		"snapshot agent.a.snapshot.3 lost-tag leftover",
		"container agent.b c2 leftover",
		"image agent.b.image built-untagged leftover",
		"container agent.c c3 leftover",
		"container agent.c.image b1 leftover",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSnapshotOfContainerBeingRemoved: a policy snapshot due of a
// container a killed apply was removing (it recorded the agent's newest
// snapshot first) cannot be committed: the container is dead, being
// removed, or gone by then. The snapshot is then the newest one's layers
// under its own config and labels (nothing committed, nothing moved), and
// the apply says so; with no snapshot to carry, the error says why.
func TestSnapshotOfContainerBeingRemoved(t *testing.T) {
	const lineage = "12345678-0000-0000-0000-000000000000"
	agent := &drivers.AgentSpec{Addr: "agent.coder", Name: "coder", Workload: drivers.MustWorkload(map[string]cty.Value{"command": strList("sleep", "2")})}
	req := drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: snapshotObject("agent.coder.snapshot.4", "agent.coder"), Hash: "h", Agent: agent}
	older := withLabels(image.InspectResponse{ID: "sha256:snap3", Architecture: "amd64", Os: "linux", Size: 5000},
		map[string]string{drivers.LabelLineage: lineage, drivers.LabelAddress: "agent.coder.snapshot.3", labelSnapshotOf: "agent.coder", labelSnapshotSource: "ctr0"})
	older.RootFS.Layers = []string{"sha256:l1", "sha256:l2"}

	for _, tc := range []struct {
		name   string
		state  *container.State // as inspected first; nil: gone
		commit error
		carry  bool // an older snapshot exists
	}{
		{"dead", &container.State{Dead: true, Status: "dead"}, nil, true},
		{"removing", &container.State{Status: "removing"}, nil, true},
		{"commit refused", &container.State{Running: true, Status: "running"}, errors.New("Error response from daemon: You cannot commit container ctr1 which is Dead"), true},
		{"gone", nil, nil, true},
		{"nothing to carry", &container.State{Dead: true, Status: "dead"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, f := newSnapFake(t, lineage, 1, 100)
			inspects := 0
			f.ContainerInspectFn = func(ref string) (container.InspectResponse, error) {
				inspects++
				if tc.state == nil || inspects > 1 {
					return container.InspectResponse{}, cerrdefs.ErrNotFound.WithMessage("No such container: " + ref)
				}
				return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: "ctr1", Image: "sha256:base", State: tc.state},
					Config: &container.Config{Labels: map[string]string{drivers.LabelLineage: lineage}}}, nil
			}
			if tc.carry {
				f.images["sha256:snap3"] = older
				f.ImageListFn = func(o image.ListOptions) ([]image.Summary, error) {
					if !o.Filters.ExactMatch("label", labelSnapshotOf+"=agent.coder") {
						return nil, nil
					}
					return []image.Summary{{ID: "sha256:snap3", RepoTags: []string{"bf-12345678-coder-snap:3"}, Labels: older.Config.Labels, Created: 1}}, nil
				}
			}
			if tc.commit != nil {
				f.commitErr = tc.commit
			}
			resp, err := d.Apply(t.Context(), req)
			if !tc.carry {
				if err == nil || !strings.Contains(err.Error(), "being removed") {
					t.Fatalf("nothing to carry: %v; want the error to say the container is being removed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.commits != 0 && tc.commit == nil {
				t.Errorf("%d commits of a container being removed", f.commits)
			}
			got := f.images[resp.ID]
			if resp.ID == "sha256:snap3" || got.Config == nil || got.Config.Labels[drivers.LabelAddress] != "agent.coder.snapshot.4" || got.Config.Labels[labelSnapshotOf] != "agent.coder" ||
				fmt.Sprint(got.RootFS.Layers) != fmt.Sprint(older.RootFS.Layers) || resp.Snapshot.Image != "bf-12345678-coder-snap:4" {
				t.Errorf("carried snapshot %+v (labels %v, layers %v): want snapshot.3's layers under snapshot.4's own config", resp, got.Config, got.RootFS.Layers)
			}
			if len(resp.Notes) != 1 || !strings.Contains(resp.Notes[0], "agent.coder.snapshot.3") {
				t.Errorf("notes %q: want one saying what was carried", resp.Notes)
			}
		})
	}
}

// TestCreateNamedWaitsForReservedName: the engine reserves a name before
// the container it names can be inspected, so a create still landing
// answers Conflict while an inspect of the name says there is none: the
// name is looked at again until the container shows, then taken over.
func TestCreateNamedWaitsForReservedName(t *testing.T) {
	inUse := cerrdefs.ErrConflict.WithMessage(`Conflict. The container name "/bf-0f1e2d3c-a-gateway" is already in use by container "late"`)
	inspects, creates := 0, 0
	removed := false
	api := &fakeAPI{
		ContainerInspectFn: func(string) (container.InspectResponse, error) {
			inspects++
			if inspects < 3 || removed {
				return container.InspectResponse{}, cerrdefs.ErrNotFound
			}
			return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: "late"},
				Config: &container.Config{Labels: map[string]string{drivers.LabelLineage: testLineage, drivers.LabelAddress: "agent.a.gateway"}}}, nil
		},
		ContainerRemoveFn: func(id string, _ container.RemoveOptions) error { removed = id == "late"; return nil },
	}
	d := fakeDriver(t, api, DefaultSubnetPool)
	created, err := d.createNamed(t.Context(), api, testLineage, "agent.a.gateway", "bf-0f1e2d3c-a-gateway", func() (container.CreateResponse, error) {
		creates++
		if !removed {
			return container.CreateResponse{}, inUse
		}
		return container.CreateResponse{ID: "mine"}, nil
	})
	if err != nil || created.ID != "mine" || !removed || inspects != 3 || creates != 4 {
		t.Fatalf("got %+v, %v after %d inspects and %d creates (removed %v): want the late container waited for, removed, and the create made again", created, err, inspects, creates, removed)
	}
}
