package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/k8stest"
)

// Issue 29's "Must show" of snapshots, migration and placement on the
// k8stest cluster, each as an operator runs the CLI. The cluster is the
// package's one (k8stest.Start); every bottle has a lineage of its own,
// removed by destroy and by k8stest's Cleanup.

// k8sRuntime is the runtime block "k" on the test cluster: its registry
// and its one node's containerd (snapshots).
func k8sRuntime(c *k8stest.Cluster) string {
	return fmt.Sprintf(`runtime "k" {
  driver          = "kubernetes"
  kubeconfig      = %q
  registry        = %q
  node_containerd = { %q = %q }
}
`, c.Kubeconfig, c.Registry, c.NodeName, "unix://"+c.ContainerdSocket)
}

// k8sTimed runs the binary, fails the test unless it exits 0, and logs
// how long it took.
func k8sTimed(t *testing.T, dir string, args ...string) result {
	t.Helper()
	start := time.Now()
	r := mustRun(t, dir, args...)
	t.Logf("bottlefile %s: %.1fs", strings.Join(args, " "), time.Since(start).Seconds())
	return r
}

// k8sCat is the file at path in the agent's container, through
// bottlefile exec, whatever its runtime.
func k8sCat(t *testing.T, dir, path string) string {
	t.Helper()
	r := bottlefile(t, dir, "exec", "-T", "agent.coder", "--", "cat", path)
	if r.code != 0 {
		t.Errorf("exec cat %s: %s", path, r)
	}
	return r.stdout
}

// k8sWrite appends line to the file at path in the agent's container.
func k8sWrite(t *testing.T, dir, path, line string) {
	t.Helper()
	mustRun(t, dir, "exec", "-T", "agent.coder", "--", "sh", "-c", "echo "+line+" >> "+path)
}

// k8sLineage is the lineage of the state in dir; it registers the
// removal of what carries it on the cluster, and a destroy
// -include-snapshots (which the registry's tags need) before that.
func k8sLineage(t *testing.T, c *k8stest.Cluster, dir string) string {
	t.Helper()
	lineage, _ := readState(t, dir)
	if lineage == "" {
		t.Fatal("state has no lineage after apply")
	}
	c.Cleanup(t, lineage)
	t.Cleanup(func() {
		if r := bottlefile(t, dir, "destroy", "-auto-approve", "-include-snapshots"); r.code != 0 {
			t.Errorf("cleanup destroy: %s", r)
		}
	})
	return lineage
}

// k8sRegistry lists the lineage's repositories in the cluster's
// registry (the catalog), and their tags as repo:tag.
func k8sRegistry(t *testing.T, c *k8stest.Cluster, lineage string) (repos, tags []string) {
	t.Helper()
	get := func(path string, out any) {
		resp, err := http.Get(c.RegistryURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", path, resp.Status, body)
		}
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatal(err)
		}
	}
	var catalog struct{ Repositories []string }
	get("/v2/_catalog?n=1000", &catalog)
	lp := drivers.LineagePrefix(lineage)
	for _, repo := range catalog.Repositories {
		if !strings.Contains(repo, lp) {
			continue
		}
		repos = append(repos, repo)
		var list struct{ Tags []string }
		get("/v2/"+repo+"/tags/list", &list)
		for _, tag := range list.Tags {
			tags = append(tags, repo+":"+tag)
		}
	}
	return repos, tags
}

// k8sManifests lists the manifests the registry's storage holds in the
// lineage's repositories, as repo@digest: a manifest deleted through the
// API loses its revision link, tagged or not (the catalog and tag lists
// cannot show an untagged one).
func k8sManifests(t *testing.T, c *k8stest.Cluster, lineage string) []string {
	t.Helper()
	root := filepath.Join(c.Dir, "registry", "data", "docker", "registry", "v2", "repositories")
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		repo, rev, ok := strings.Cut(filepath.ToSlash(rel), "/_manifests/revisions/sha256/")
		if d.IsDir() || d.Name() != "link" || !ok || !strings.Contains(repo, drivers.LineagePrefix(lineage)) {
			return nil
		}
		out = append(out, repo+"@sha256:"+strings.TrimSuffix(rev, "/link"))
		return nil
	})
	if err != nil {
		t.Fatalf("reading the registry's storage: %v", err)
	}
	return out
}

// k8sManifestStatus is the registry's status for the manifest a
// snapshot's reference (REGISTRY/REPO@DIGEST) names.
func k8sManifestStatus(t *testing.T, c *k8stest.Cluster, ref string) int {
	t.Helper()
	repo, digest, ok := strings.Cut(strings.TrimPrefix(ref, c.Registry+"/"), "@")
	if !ok {
		t.Fatalf("%q is not REGISTRY/REPO@DIGEST in %s", ref, c.Registry)
	}
	req, err := http.NewRequest(http.MethodHead, c.RegistryURL+"/v2/"+repo+"/manifests/"+digest, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// k8sPolicyBottlefile is an agent on the cluster whose destroy is
// preceded by a snapshot.
const k8sPolicyBottlefile = `%s
agent "coder" {
  runtime = runtime.k
  image   = %q
  command = ["sleep", "600"]

  snapshot_policy {
    before = ["destroy"]
  }
}
`

// TestE2EKubernetesSnapshotResume: under before = ["destroy"], destroy
// takes a snapshot (the plan says so) through the node's containerd into
// the registry, and apply again resumes from it (the plan says so) with
// the file the agent wrote. Then destroy -include-snapshots leaves no
// namespace, object, registry tag or manifest of the lineage.
func TestE2EKubernetesSnapshotResume(t *testing.T) {
	c := parallelOnCluster(t)
	begin := time.Now()
	dir := t.TempDir()
	writeBottlefile(t, dir, k8sPolicyBottlefile, k8sRuntime(c), c.Busybox)
	k8sTimed(t, dir, "apply", "-auto-approve")
	lineage := k8sLineage(t, c, dir)
	k8sWrite(t, dir, "/notes", "kept")

	r := mustRun(t, dir, "plan", "-destroy")
	wantAll(t, "the destroy plan", r.stdout, "@ agent.coder.snapshot.1 (snapshot)", "- agent.coder (pod)")
	if strings.Contains(r.stdout, "- agent.coder.snapshot.1") {
		t.Errorf("the destroy plan removes the snapshot:\n%s", r.stdout)
	}
	k8sTimed(t, dir, "destroy", "-auto-approve")
	rec, ok := snapRecord(t, dir, "agent.coder.snapshot.1")
	if !ok || !strings.HasPrefix(rec.Computed["image"], c.Registry+"/") || !strings.Contains(rec.Computed["image"], "@sha256:") {
		t.Fatalf("destroy did not record a snapshot in the registry by digest: %+v", rec)
	}
	if code := k8sManifestStatus(t, c, rec.Computed["image"]); code != http.StatusOK {
		t.Fatalf("the snapshot's manifest %s in the registry: HTTP %d", rec.Computed["image"], code)
	}
	left, err := c.LineageObjects(lineage)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		if !strings.Contains(l, "-snapshots") {
			t.Errorf("left on the cluster after destroy (but the snapshot index): %s", l)
		}
	}

	r = mustRun(t, dir, "plan")
	wantAll(t, "the plan after destroy", r.stdout, "+ agent.coder (pod)", "it resumes from agent.coder.snapshot.1")
	k8sTimed(t, dir, "apply", "-auto-approve")
	if got := k8sCat(t, dir, "/notes"); got != "kept\n" {
		t.Errorf("the resumed agent's /notes = %q, want %q", got, "kept\n")
	}
	wantNoChanges(t, dir, "after the resume")

	// destroy -include-snapshots: the destroy's own snapshot is taken and
	// then deleted with the rest; nothing of the lineage is left.
	// Snapshots are pushed by digest, untagged: what the registry holds
	// of the lineage is its manifests, in its storage.
	if held := k8sManifests(t, c, lineage); len(held) == 0 {
		t.Errorf("before destroy -include-snapshots the registry's storage holds no manifest of the lineage: the check below would prove nothing")
	} else {
		t.Logf("before destroy -include-snapshots the registry holds %v", held)
	}
	r = k8sTimed(t, dir, "destroy", "-auto-approve", "-include-snapshots")
	if !strings.Contains(r.stdout, "Destroy complete!") {
		t.Errorf("destroy -include-snapshots:\n%s", r)
	}
	k8sNothingLeft(t, c, dir, lineage, rec.Computed["image"])
	t.Logf("snapshot, destroy, resume, destroy -include-snapshots: %.1fs", time.Since(begin).Seconds())
}

// k8sNothingLeft fails the test if anything of the lineage is left on
// the cluster (namespaces and labelled objects, waited for: a deleted
// namespace terminates) or in the registry (tags of its repositories,
// and the manifests refs name), or if the state still records
// something.
func k8sNothingLeft(t *testing.T, c *k8stest.Cluster, dir, lineage string, refs ...string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var err error
		if left, err = c.LineageObjects(lineage); err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left on the cluster after destroy -include-snapshots:\n  %s", strings.Join(left, "\n  "))
	}
	repos, tags := k8sRegistry(t, c, lineage)
	if len(tags) > 0 {
		t.Errorf("after destroy -include-snapshots the registry holds %v", tags)
	}
	if held := k8sManifests(t, c, lineage); len(held) > 0 {
		t.Errorf("after destroy -include-snapshots the registry's storage holds the manifests %v", held)
	}
	t.Logf("the registry's catalog still names the lineage's repositories %v with no tag (the registry keeps a repository's directory)", repos)
	for _, ref := range refs {
		if code := k8sManifestStatus(t, c, ref); code != http.StatusNotFound {
			t.Errorf("after destroy -include-snapshots the manifest %s: HTTP %d, want 404", ref, code)
		}
	}
	if _, recs := readState(t, dir); len(recs) != 0 {
		var addrs []string
		for _, r := range recs {
			addrs = append(addrs, r.Addr)
		}
		t.Errorf("the state still records %v", addrs)
	}
}

// k8sMigrateBottlefile is one agent on runtime %[3]s: "local" (the
// test's docker engine) or "k" (the cluster, %[1]s). Its image (%[2]s)
// is the engine's busybox: on the cluster it boots from the snapshot the
// migration moves there.
const k8sMigrateBottlefile = `%[1]s
runtime "local" {
  driver = "docker"
}

agent "coder" {
  runtime = runtime.%[3]s
  image   = %[2]q
  command = ["sleep", "600"]
}
`

// TestE2EKubernetesMigrate: an agent moved docker -> kubernetes ->
// docker, each time one reviewed plan (=> migrate with its snapshot),
// keeps the file written on docker, and the one written on the cluster.
func TestE2EKubernetesMigrate(t *testing.T) {
	c := parallelOnCluster(t)
	begin := time.Now()
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, k8sMigrateBottlefile, k8sRuntime(c), image, "local")
	k8sTimed(t, dir, "apply", "-auto-approve")
	lineage := k8sLineage(t, c, dir)
	snapLineage(t, cli, dir) // the docker containers, and the snapshot images the move back loads
	local := func() []string {
		var ids []string
		for _, ctr := range containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent.coder") {
			if ctr.State == "running" {
				ids = append(ids, ctr.ID)
			}
		}
		return ids
	}
	k8sWrite(t, dir, "/notes", "from-docker")

	// docker -> kubernetes
	writeBottlefile(t, dir, k8sMigrateBottlefile, k8sRuntime(c), image, "k")
	r := mustRun(t, dir, "plan")
	wantAll(t, "the plan to the cluster", r.stdout,
		`will be migrated from runtime "local" to "k"`,
		"=> agent.coder (pod)",
		"@ agent.coder.snapshot.1 (snapshot)",
		`agent.coder's filesystem is committed on runtime "local" and moved to "k" (migration)`,
	)
	k8sTimed(t, dir, "apply", "-auto-approve")
	if ids := local(); len(ids) != 0 {
		t.Errorf("the docker container still runs after the move to the cluster: %v", ids)
	}
	pods, err := c.Kubectl("get", "pods", "-A", "-l", drivers.LabelLineage+"="+lineage, "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.phase} {.spec.containers[0].image}{"\n"}{end}`)
	if err != nil || !strings.Contains(pods, " Running "+c.Registry+"/") {
		t.Errorf("after the move the agent's Pod does not run from the registry: %q %v", pods, err)
	}
	if got := k8sCat(t, dir, "/notes"); got != "from-docker\n" {
		t.Errorf("on the cluster /notes = %q", got)
	}
	if rec, ok := snapRecord(t, dir, "agent.coder"); !ok || rec.Runtime != "k" {
		t.Errorf("after the move the state records agent.coder on %q, want k", rec.Runtime)
	}
	// What moved to the cluster is recorded there with no docker
	// engine's identity: one would make the next plan take the two
	// runtimes for one engine, and move records instead of migrating.
	_, recs := readState(t, dir)
	for _, r := range recs {
		if r.Runtime == "k" && strings.HasPrefix(r.Engine, "docker:") {
			t.Errorf("%s is recorded on runtime k with the docker engine %s", r.Addr, r.Engine)
		}
	}
	wantNoChanges(t, dir, "after the move to the cluster")

	// kubernetes -> docker
	k8sWrite(t, dir, "/notes", "from-kubernetes")
	writeBottlefile(t, dir, k8sMigrateBottlefile, k8sRuntime(c), image, "local")
	r = mustRun(t, dir, "plan")
	wantAll(t, "the plan back to docker", r.stdout,
		`will be migrated from runtime "k" to "local"`,
		"=> agent.coder (container)",
		"@ agent.coder.snapshot.2 (snapshot)",
	)
	k8sTimed(t, dir, "apply", "-auto-approve")
	if ids := local(); len(ids) != 1 {
		t.Fatalf("after the move back the agent is not running on docker: %v", ids)
	}
	if got := k8sCat(t, dir, "/notes"); got != "from-docker\nfrom-kubernetes\n" {
		t.Errorf("back on docker /notes = %q", got)
	}
	if pods, err := c.Kubectl("get", "pods", "-A", "-l", drivers.LabelLineage+"="+lineage, "-o", "name"); err != nil || strings.TrimSpace(pods) != "" {
		t.Errorf("Pods of the lineage left on the cluster after the move back: %q %v", pods, err)
	}
	wantNoChanges(t, dir, "after the move back")
	t.Logf("docker -> kubernetes -> docker: %.1fs", time.Since(begin).Seconds())
}

// k8sPlacementBottlefile is an agent on the cluster with a node
// selector (%s: key, value).
const k8sPlacementBottlefile = `%s
agent "coder" {
  runtime = runtime.k
  image   = %q
  command = ["sleep", "600"]

  driver {
    node_selector = { %q = %q }
  }
}
`

// TestE2EKubernetesPlacement: a node selector no node matches fails the
// apply soon after the Pod is made, naming the scheduler's reason; one
// the node matches (its hostname label) places the agent there.
func TestE2EKubernetesPlacement(t *testing.T) {
	c := parallelOnCluster(t)
	dir := t.TempDir()
	writeBottlefile(t, dir, k8sPlacementBottlefile, k8sRuntime(c), c.Busybox, "pool", "nowhere")
	start := time.Now()
	r := bottlefileWithin(t, 60*time.Second, dir, "apply", "-auto-approve")
	took := time.Since(start)
	lineage := k8sLineage(t, c, dir)
	if r.code == 0 {
		t.Fatalf("apply with a selector no node matches succeeded:\n%s", r)
	}
	wantAll(t, "the failed apply", r.stdout+r.stderr, "cannot be scheduled", "node affinity/selector")
	// The Pod is made after the namespace and removed when the apply
	// fails: the whole apply bounds the time from the Pod's creation to
	// the failure.
	t.Logf("a selector no node matches: apply failed %.1fs after it began (its namespace and Pod made, the scheduler's refusal read, the Pod removed)", took.Seconds())
	if took > 10*time.Second {
		t.Logf("more than 10 s: the issue asks for a failure within 10 s of the Pod's creation")
	}
	writeBottlefile(t, dir, k8sPlacementBottlefile, k8sRuntime(c), c.Busybox, "kubernetes.io/hostname", c.NodeName)
	k8sTimed(t, dir, "apply", "-auto-approve")
	node, err := c.Kubectl("get", "pods", "-A", "-l", drivers.LabelLineage+"="+lineage, "-o", `jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{"\n"}{end}`)
	if err != nil || strings.TrimSpace(node) != c.NodeName+" Running" {
		t.Errorf("with the node's hostname as selector the agent's Pod: %q %v, want it running on %s", node, err, c.NodeName)
	}
	wantNoChanges(t, dir, "after the placement")
}
