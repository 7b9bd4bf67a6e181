package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/state"
)

// trustBottlefile is issue 11's scenario: an agent built locally, two
// sidecars, a sensitive variable in the agent's env, in its command and
// (hashed) in its labels, and a policy that snapshots before a replace
// and before a destroy. %q is the sidecars' image. The low flatten_depth
// makes some of the snapshots commits and some flattened (export and
// import), so both ways of making one are searched for the secret.
const trustBottlefile = `
variable "key" {
  type      = string
  sensitive = true
}

runtime "local" {
  driver        = "docker"
  flatten_depth = 4
}

agent "coder" {
  runtime = runtime.local
  build {
    context = "./agent"
  }
  command = ["sh", "-c", "echo ${var.key} >/dev/null; exec sleep 3600"]
  env = {
    API_KEY = var.key
    AUTH    = "Bearer ${var.key}"
    ROLE    = "coder"
  }
  labels  = { key_fp = sha256(var.key) }
  workdir = "/workspace"

  sidecar "cache" {
    image   = %[1]q
    command = ["sleep", "3600"]
  }

  sidecar "git-gate" {
    image   = %[1]q
    command = ["sleep", "3600"]
    env     = { TOKEN = var.key }
  }

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 10
  }
}
`

// trustSecret is a fresh value for the sensitive variable: random, so that
// finding it anywhere can only mean bottlefile put it there.
func trustSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "bf-secret-" + hex.EncodeToString(b)
}

// trustNeedles are the byte strings no image may hold: the secret, and
// what the configuration derives from it (its sha256, a label).
func trustNeedles(secret string) map[string][]byte {
	sum := sha256.Sum256([]byte(secret))
	return map[string][]byte{
		"the sensitive value":           []byte(secret),
		"sha256 of the sensitive value": []byte(hex.EncodeToString(sum[:])),
	}
}

// trustRun runs the binary in dir with extra environment. It does not
// touch t, so goroutines may call it; err is set only when the binary
// could not be run (or ran over its time).
func trustRun(dir string, env []string, args ...string) (result, error) {
	r, timedOut, err := runBinary(5*time.Minute, dir, env, args...)
	switch {
	case timedOut:
		return r, fmt.Errorf("bottlefile %s did not end within 5 minutes: %w\n%s", strings.Join(args, " "), context.DeadlineExceeded, r)
	case err != nil:
		return r, fmt.Errorf("running bottlefile %s: %w", strings.Join(args, " "), err)
	}
	return r, nil
}

// trustMustRun runs the binary with extra environment and fails the test
// unless it exits 0.
func trustMustRun(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	r, err := trustRun(dir, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	if r.code != 0 {
		t.Fatalf("bottlefile %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// trustBuildContext writes a build context whose Dockerfile starts FROM
// base and adds a file.
func trustBuildContext(t *testing.T, dir, base string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Dockerfile": "FROM " + base + "\nCOPY motd /etc/motd\n",
		"motd":       "built by the snapshot trust test\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// trustSnapshotRecords are the state's snapshot records, by address.
func trustSnapshotRecords(t *testing.T, dir string) map[string]state.Record {
	t.Helper()
	_, recs := readState(t, dir)
	out := map[string]state.Record{}
	for _, r := range recs {
		if r.Kind == drivers.KindSnapshot {
			out[r.Addr] = r
		}
	}
	return out
}

// trustMissingSnapshots names the recorded snapshots whose image is not on the
// engine (by id, and by the reference the record gives).
func trustMissingSnapshots(t *testing.T, cli *client.Client, recs map[string]state.Record) []string {
	t.Helper()
	var missing []string
	for addr, r := range recs {
		for _, ref := range []string{r.ID, r.Computed["image"]} {
			if ref == "" {
				missing = append(missing, addr+" (recorded without an image)")
				continue
			}
			info, err := cli.ImageInspect(context.Background(), ref)
			switch {
			case cerrdefs.IsNotFound(err):
				missing = append(missing, fmt.Sprintf("%s (%s is not on the engine)", addr, ref))
			case err != nil:
				t.Fatal(err)
			case info.ID != r.ID:
				missing = append(missing, fmt.Sprintf("%s (%s is image %s, the state records %s)", addr, ref, short(info.ID), short(r.ID)))
			}
		}
	}
	return missing
}

// trustLineageImages lists every image carrying the lineage label, untagged and
// intermediate ones included.
func trustLineageImages(t *testing.T, cli *client.Client, lineage string) []image.Summary {
	t.Helper()
	imgs, err := cli.ImageList(context.Background(), image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))})
	if err != nil {
		t.Fatal(err)
	}
	return imgs
}

// trustScanImage looks for the needles in what the engine says of an image (its
// inspect JSON and its history) and in its docker-save tar (config and
// every layer), and returns where it found each.
func trustScanImage(t *testing.T, cli *client.Client, id string, needles map[string][]byte) []string {
	t.Helper()
	ctx := context.Background()
	var raw bytes.Buffer
	if _, err := cli.ImageInspect(ctx, id, client.ImageInspectWithRawResponse(&raw)); err != nil {
		t.Fatalf("inspecting image %s: %v", short(id), err)
	}
	hist, err := cli.ImageHistory(ctx, id)
	if err != nil {
		t.Fatalf("history of image %s: %v", short(id), err)
	}
	histJSON, err := json.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cli.ImageSave(ctx, []string{id})
	if err != nil {
		t.Fatalf("saving image %s: %v", short(id), err)
	}
	saved, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("saving image %s: %v", short(id), err)
	}
	var found []string
	for where, data := range map[string][]byte{"image inspect": raw.Bytes(), "image history": histJSON, "image save tar": saved} {
		found = append(found, trustScanBytes(where, data, needles)...)
	}
	return found
}

func trustScanBytes(where string, data []byte, needles map[string][]byte) []string {
	var found []string
	for what, needle := range needles {
		if i := bytes.Index(data, needle); i >= 0 {
			lo, hi := max(0, i-80), min(len(data), i+len(needle)+40)
			found = append(found, fmt.Sprintf("%s holds %s, at byte %d: ...%q...", where, what, i, data[lo:hi]))
		}
	}
	return found
}

// trustScanContainer looks for the needles in a container's inspect JSON
// (its config: env, command, labels).
func trustScanContainer(t *testing.T, cli *client.Client, id string, needles map[string][]byte) []string {
	t.Helper()
	_, raw, err := cli.ContainerInspectWithRaw(context.Background(), id, false)
	if err != nil {
		t.Fatalf("inspecting container %s: %v", short(id), err)
	}
	return trustScanBytes("container inspect", raw, needles)
}

// trustLineageLeft lists the containers, networks and images that carry the
// lineage label.
func trustLineageLeft(t *testing.T, cli *client.Client, lineage string) []string {
	t.Helper()
	var left []string
	for _, c := range trustContainerNames(containersWith(t, cli, drivers.LabelLineage+"="+lineage)) {
		left = append(left, "container "+c)
	}
	for _, n := range networksWith(t, cli, drivers.LabelLineage+"="+lineage) {
		left = append(left, fmt.Sprintf("network %s %s", n.Labels[drivers.LabelAddress], n.Name))
	}
	for _, img := range trustLineageImages(t, cli, lineage) {
		left = append(left, fmt.Sprintf("image %s %s %v", img.Labels[drivers.LabelAddress], short(strings.TrimPrefix(img.ID, "sha256:")), img.RepoTags))
	}
	return left
}

// TestE2ESnapshotTrust is issue 11's first "must show", on the real
// engine: an agent built locally, with two sidecars, a sensitive value in
// its env, its command and (hashed) its labels, and snapshot_policy
// before = ["replace", "destroy"]. The agent writes a file; then three
// rounds of destroy (each exits 0, keeps the policy snapshot, leaves no
// container) and apply (the agent resumes from the newest snapshot, with
// every line written so far). Then no image of the lineage (inspect JSON,
// history, docker-save tar) and no `snapshot export` tar holds the
// sensitive value or its hash, nor does anything under .bottlefile. At
// last destroy -include-snapshots exits 0 and leaves nothing carrying the
// lineage label.
func TestE2ESnapshotTrust(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	trustBuildContext(t, filepath.Join(dir, "agent"), img)
	writeBottlefile(t, dir, trustBottlefile, img)
	secret := trustSecret(t)
	needles := trustNeedles(secret)
	env := []string{"BOTTLEFILE_VAR_key=" + secret}

	trustMustRun(t, dir, env, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	agent := snapAgentContainer(t, cli, lineage)
	if got := dockertest.Sh(t, cli, agent.ID, "cat /etc/motd"); !strings.Contains(got, "built by the snapshot trust test") {
		t.Fatalf("the agent does not run the built image: /etc/motd = %q", got)
	}
	for _, sc := range []string{"cache", "git-gate"} {
		if n := len(containersWith(t, cli, drivers.LabelAddress+"=agent.coder.sidecar."+sc, drivers.LabelLineage+"="+lineage)); n != 1 {
			t.Fatalf("sidecar %s: %d containers", sc, n)
		}
	}
	// The control: the agent's container holds the secret (its declared
	// env and command), so the scans below look for the right bytes.
	if found := trustScanContainer(t, cli, agent.ID, needles); len(found) != len(needles) {
		t.Fatalf("control: the agent's container should hold the secret and its hash (env, command, labels), found only: %v", found)
	}
	var want strings.Builder
	write := func(id, line string) {
		t.Helper()
		dockertest.Sh(t, cli, id, "echo '"+line+"' >> /workspace/work.txt")
		want.WriteString(line + "\n")
	}
	write(agent.ID, "written before any destroy")

	for round := 1; round <= 3; round++ {
		r, err := trustRun(dir, env, "destroy", "-auto-approve")
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 0 {
			t.Errorf("round %d: destroy exits %d, want 0 with the policy snapshots kept:\n%s%s", round, r.code, trustSummary(r.stdout), r.stderr)
		}
		if left := trustContainerNames(containersWith(t, cli, drivers.LabelLineage+"="+lineage)); len(left) != 0 {
			t.Errorf("round %d: containers left after destroy: %v", round, left)
		}
		snaps := trustSnapshotRecords(t, dir)
		if _, ok := snaps[fmt.Sprintf("agent.coder.snapshot.%d", round)]; !ok || len(snaps) != round {
			t.Errorf("round %d: after destroy the state records snapshots %v, want agent.coder.snapshot.1 to .%d", round, trustKeys(snaps), round)
		}
		if missing := trustMissingSnapshots(t, cli, snaps); len(missing) != 0 {
			t.Fatalf("round %d: recorded snapshots lost after destroy: %v", round, missing)
		}

		r = trustMustRun(t, dir, env, "apply", "-auto-approve")
		agent = snapAgentContainer(t, cli, lineage)
		if got := dockertest.Sh(t, cli, agent.ID, "cat /workspace/work.txt"); got != want.String() {
			t.Fatalf("round %d: the agent did not resume its work: /workspace/work.txt = %q, want %q\napply: %s", round, got, want.String(), r)
		}
		if rec, ok := snaps[fmt.Sprintf("agent.coder.snapshot.%d", round)]; ok && agent.ImageID != rec.ID {
			t.Errorf("round %d: the agent runs image %s, not the newest snapshot %s", round, short(agent.ImageID), short(rec.ID))
		}
		if r := trustMustRun(t, dir, env, "plan"); !strings.Contains(r.stdout, "No changes.") {
			t.Errorf("round %d: not converged after apply:\n%s", round, r)
		}
		// The resumed agent runs as declared: its env and command come
		// from the configuration, not from the snapshot.
		if got := dockertest.Sh(t, cli, agent.ID, `printf '%s|%s|%s' "$API_KEY" "$AUTH" "$ROLE"`); got != secret+"|Bearer "+secret+"|coder" {
			t.Errorf("round %d: the resumed agent's env is not the declared one (API_KEY, AUTH, ROLE matching: %t)", round, got == secret+"|Bearer "+secret+"|coder")
		}
		if found := trustScanContainer(t, cli, agent.ID, needles); len(found) != len(needles) {
			t.Errorf("round %d: the resumed agent's container lacks the declared sensitive env, command or labels: found only %v", round, found)
		}
		write(agent.ID, fmt.Sprintf("written after resume %d", round))
	}

	// The plan of a destroy says which snapshots it keeps.
	r := trustMustRun(t, dir, env, "plan", "-destroy")
	snapWant(t, "destroy plan", r.stdout, "# kept: agent.coder.snapshot.1", "# kept: agent.coder.snapshot.3")

	var depths []string
	snaps := trustSnapshotRecords(t, dir)
	for _, addr := range trustKeys(snaps) {
		depths = append(depths, addr+" depth "+snaps[addr].Computed["depth"])
	}
	t.Logf("snapshots (depth 1: flattened): %s", strings.Join(depths, ", "))

	// No image of the lineage holds the secret.
	imgs := trustLineageImages(t, cli, lineage)
	if len(imgs) < 4 {
		t.Errorf("want the built image and three snapshots in the lineage, found %d images", len(imgs))
	}
	for _, im := range imgs {
		for _, f := range trustScanImage(t, cli, im.ID, needles) {
			t.Errorf("image %s %v (%s): %s", short(strings.TrimPrefix(im.ID, "sha256:")), im.RepoTags, im.Labels[drivers.LabelAddress], f)
		}
	}
	// Nor any export.
	for _, addr := range trustKeys(snaps) {
		tarball := filepath.Join(t.TempDir(), "export.tar")
		trustMustRun(t, dir, env, "snapshot", "export", addr, "-o", tarball)
		data, err := os.ReadFile(tarball)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range trustScanBytes("snapshot export tar of "+addr, data, needles) {
			t.Error(f)
		}
	}
	// Nor anything bottlefile keeps beside the Bottlefile.
	_ = filepath.Walk(filepath.Join(dir, ".bottlefile"), func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range trustScanBytes(path, data, map[string][]byte{"the sensitive value": []byte(secret)}) {
			t.Error(f)
		}
		return nil
	})

	// destroy -include-snapshots leaves nothing of the lineage.
	r, err := trustRun(dir, env, "destroy", "-include-snapshots", "-auto-approve")
	if err != nil {
		t.Fatal(err)
	}
	if r.code != 0 {
		t.Fatalf("destroy -include-snapshots: %s", r)
	}
	if left := trustLineageLeft(t, cli, lineage); len(left) != 0 {
		t.Errorf("destroy -include-snapshots left objects carrying the lineage:\n  %s", strings.Join(left, "\n  "))
	}
	if _, recs := readState(t, dir); len(recs) != 0 {
		var addrs []string
		for _, rec := range recs {
			addrs = append(addrs, rec.Addr)
		}
		t.Errorf("destroy -include-snapshots left records: %v", addrs)
	}
}

// trustContainerNames are the containers' addresses, ids and states.
func trustContainerNames(list []container.Summary) []string {
	var out []string
	for _, c := range list {
		out = append(out, fmt.Sprintf("%s %s (%s)", c.Labels[drivers.LabelAddress], short(c.ID), c.State))
	}
	return out
}

// trustSummary keeps the lines of an apply's or destroy's output that say
// how it ended: what failed and what was left undone.
func trustSummary(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "failed") || strings.Contains(line, "Failed") || strings.HasPrefix(line, "Apply ") || strings.HasPrefix(line, "Destroy ") || strings.Contains(line, "not started") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func trustKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
