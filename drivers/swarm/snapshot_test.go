package swarm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/swarm/swarmtest"
)

// registryGet is the body of a GET of the fixture's registry API.
func registryGet(t *testing.T, f *swarmtest.Fixture, path string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, f.RegistryURL+path, nil)
	req.Header["Accept"] = manifestTypes
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	return body
}

// lineageTags lists every tag of the lineage's snapshot repositories in
// the registry, as repo:tag.
func lineageTags(t *testing.T, d *Driver, lineage string) []string {
	t.Helper()
	repos, err := d.regAPI.repositories(t.Context(), "bf-"+drivers.LineagePrefix(lineage)+"-", "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range repos {
		tags, err := d.regAPI.tags(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range tags {
			out = append(out, r+":"+tag)
		}
	}
	return out
}

// TestSnapshotOnSwarm: an agent on node2, with a secret in its env, writes
// a file. Snapshots are committed through node2's engine while sweeps of
// that engine run all the time, and pushed to the registry: each is there
// afterwards, Read reports it, and neither the registry's manifest and
// config nor an export holds the secret. A service created from the
// newest on node3 has the file. Deleting the snapshots leaves no tag of
// the lineage in the registry, and deleting everything leaves nothing of
// the lineage on any node.
func TestSnapshotOnSwarm(t *testing.T) {
	const secret = "sk-bottlefile-swarm-5e1d"
	f := swarmtest.Start(t)
	d := fixtureDriver(t, f, true, nil)
	lineage := uuid.NewString()
	f.Cleanup(t, lineage)
	ctx := t.Context()

	agent := placedAgent("keeper", f.Busybox, []string{"node.labels.zone==b"}, nil)
	agent.Workload = drivers.WithWorkloadAttr(agent.Workload, "env", cty.MapVal(map[string]cty.Value{"API_KEY": cty.StringVal(secret).Mark("sensitive")}))
	plan, err := d.Plan(ctx, drivers.PlanRequest{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lineage, plan.Objects)
	svc, _ := serviceName(lineage, "agent.keeper")
	node, ctr := taskContainer(t, f, svc)
	if node != 1 {
		t.Fatalf("the agent runs on node%d, want node2 (zone b)", node+1)
	}
	cli := f.Client(t, node)
	if out := dockertest.Sh(t, cli, ctr, "echo work > /root/f && echo $API_KEY"); !strings.Contains(out, secret) {
		t.Fatalf("the task does not hold the secret (%q): the test proves nothing", out)
	}

	// Snapshots while node2's engine is swept without a pause.
	nodeEng, _, err := d.nodeEngine(ctx, "node2")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sweeps := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			nodeEng.SweepSnapshots(ctx, lineage)
			sweeps++
			time.Sleep(5 * time.Millisecond)
		}
	})
	taken := map[string]drivers.ApplyResponse{}
	for i := 1; i <= 3; i++ {
		dockertest.Sh(t, cli, ctr, fmt.Sprintf("echo %d >> /root/f", i))
		addr := fmt.Sprintf("agent.keeper.snapshot.%d", i)
		obj := drivers.Object{Addr: addr, Kind: drivers.KindSnapshot, Attrs: map[string]cty.Value{"agent": cty.StringVal("agent.keeper")}}
		r, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: obj, Hash: "h-" + addr, Agent: &agent})
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("taking %s: %v", addr, err)
		}
		if r.Computed["node"] != "node2" || r.Snapshot == nil || !strings.HasPrefix(r.ID, f.Registry+"/") || r.Snapshot.Image != r.ID || r.Snapshot.Size <= 0 {
			t.Errorf("%s: %+v %+v, want a snapshot committed on node2 in the registry", addr, r, r.Snapshot)
		}
		taken[addr] = r
	}
	close(stop)
	wg.Wait()
	if sweeps == 0 {
		t.Fatal("no sweep ran: the test raced nothing")
	}
	read := readIDs(t, d, lineage)
	for addr, r := range taken {
		if read[addr] != r.ID {
			t.Errorf("Read reports %s as %q, want %q", addr, read[addr], r.ID)
		}
	}
	t.Logf("3 snapshots taken on node2 during %d sweeps of its engine", sweeps)

	// No secret in what the registry holds, nor in an export.
	newest := taken["agent.keeper.snapshot.3"]
	repo, digest, err := splitRef(f.Registry, newest.ID)
	if err != nil {
		t.Fatal(err)
	}
	manifest := registryGet(t, f, "/v2/"+repo+"/manifests/"+digest)
	var m struct {
		Config struct{ Digest string }
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	config := registryGet(t, f, "/v2/"+repo+"/blobs/"+m.Config.Digest)
	if !bytes.Contains(config, []byte(lineage)) {
		t.Fatalf("the snapshot's config does not carry the lineage: the grep proves nothing:\n%s", config)
	}
	var exported bytes.Buffer
	if err := d.ExportSnapshot(ctx, newest.ID, &exported); err != nil {
		t.Fatalf("export: %v", err)
	}
	if !bytes.Contains(exported.Bytes(), []byte("work\n1\n2\n3\n")) {
		t.Errorf("the export (%d bytes) lacks the agent's file", exported.Len())
	}
	for what, b := range map[string][]byte{"manifest": manifest, "config": config, "export": exported.Bytes()} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret is in the snapshot's %s", what)
		}
	}

	// The agent again, on node3, from the newest snapshot.
	for _, o := range plan.Objects {
		if o.Addr == "agent.keeper" {
			if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, Object: drivers.Object{Addr: o.Addr, Kind: o.Kind}}); err != nil {
				t.Fatal(err)
			}
			o.Attrs["placement"] = drivers.StringsValue([]string{"node.labels.zone==c"})
			if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpCreate, Lineage: lineage, Object: o, Hash: "h2", BootImage: newest.Snapshot.Image}); err != nil {
				t.Fatalf("creating the agent from %s: %v", newest.ID, err)
			}
		}
	}
	mgr, err := d.manager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	task, host, err := d.taskOf(ctx, mgr, lineage, "agent.keeper")
	if err != nil {
		t.Fatal(err)
	}
	if host != "node3" {
		t.Errorf("the resumed agent runs on %s, want node3", host)
	}
	if out := dockertest.Sh(t, f.Client(t, 2), task.Status.ContainerStatus.ContainerID, "cat /root/f"); out != "work\n1\n2\n3\n" {
		t.Errorf("the resumed agent's /root/f = %q", out)
	}
	// The boot source is the live service's: Read reports the snapshot
	// it runs from, whatever a record says (retention reads it there).
	live, err := d.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range live.Objects {
		if o.Addr == "agent.keeper" && o.ImageID != newest.Snapshot.Image {
			t.Errorf("Read says agent.keeper runs %q, want the snapshot %s it was created from", o.ImageID, newest.Snapshot.Image)
		}
	}

	for addr, r := range taken {
		for range 2 {
			if _, err := d.Apply(ctx, drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: lineage, ID: r.ID, Object: drivers.Object{Addr: addr, Kind: drivers.KindSnapshot}}); err != nil {
				t.Errorf("deleting %s: %v", addr, err)
			}
		}
	}
	if left := lineageTags(t, d, lineage); len(left) > 0 {
		t.Errorf("the registry still holds %v", left)
	}
	deleteAll(t, d, lineage)
	assertNothingLeft(t, f, lineage)
}

// readIDs maps each object Read reports in the lineage to its ID.
func readIDs(t *testing.T, d drivers.Driver, lineage string) map[string]string {
	t.Helper()
	read, err := d.Read(t.Context(), drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	out := map[string]string{}
	for _, o := range read.Objects {
		out[o.Addr] = o.ID
	}
	return out
}
