// Package swarmtest runs a real Docker Swarm for tests, on one Linux
// machine: three nodes (one manager, two workers), each its own dockerd
// (and containerd) in network, PID, UTS and mount namespaces of its own,
// joined by veth pairs to a bridge in a hub namespace that also runs a
// registry (Debian's docker-registry). Nothing of it is visible in the
// host's network namespace, and the host's engine is never touched.
//
// A test package starts it at most once, when its first test asks, and
// stops it when the package's tests end:
//
//	func TestMain(m *testing.M) { os.Exit(swarmtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		f := swarmtest.Start(t) // skips, or fails with BOTTLEFILE_REQUIRE_SWARM=1
//		cli := f.Client(t, 0)   // the manager's engine
//		...
//	}
//
// Every process of a node (dockerd, containerd, the shims and the task
// containers) lives in that node's PID namespace, whose first process is
// killed with the test process (a parent-death signal): when it dies the
// kernel kills the rest. Teardown kills the namespaces' first processes by
// PID and the fixture's cgroups' processes, then removes its cgroups and
// directory. A fixture left by a run that was killed before it could do
// that (its directory and cgroups) is removed by the next Start.
//
// Facts the fixture follows are in the project's reference notes on swarm
// (no IPVS, so services use dnsrr; no default route in the nodes, so
// image lookups other than the registry's fail at once).
package swarmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/internal/nsfixture"
)

// RequireEnv names the environment variable that turns a fixture that
// cannot start from a skip into a failure ("1"), for CI.
const RequireEnv = "BOTTLEFILE_REQUIRE_SWARM"

// Addresses inside the fixture. They exist only in its namespaces, so
// fixtures of several test processes never collide.
const (
	// Underlay is the nodes' network: node i (from 1) is Underlay.i.
	Underlay = "10.250.0"
	// Registry is the registry's address as every node reaches it (an
	// insecure registry on each node: plain HTTP).
	Registry = Underlay + ".254:5000"
	// Outside is a host outside the swarm, on the hub, reachable from the
	// nodes' own namespaces (and through docker_gwbridge from tasks on a
	// normal overlay), for egress tests. An HTTP server on its port 80
	// answers "outside-ok".
	Outside = "198.51.100.10"
)

// BusyboxRepo is the repository the busybox test image is pushed to in
// the fixture's registry.
const BusyboxRepo = Registry + "/bottlefile-test/busybox"

// Node is one node of the fixture.
type Node struct {
	Name    string // its hostname, the swarm node name: "node1"
	Addr    string // its underlay address
	Host    string // its engine, "unix://..."
	ID      string // its swarm node id
	Manager bool
	// Labels are its swarm node labels (node.labels.KEY in constraints).
	Labels map[string]string
}

// NodeLabels are the labels each node gets, in order: placement tests
// constrain on node.labels.pool.
var NodeLabels = []map[string]string{
	{"pool": "control", "zone": "a"},
	{"pool": "agents", "zone": "b"},
	{"pool": "agents", "zone": "c"},
}

// Fixture is a running swarm.
type Fixture struct {
	// Dir holds the nodes' data, sockets and logs.
	Dir   string
	Nodes []Node // Nodes[0] is the manager
	// Registry is the registry's address, as Registry.
	Registry string
	// RegistryURL is where this process reaches the registry's HTTP API
	// (the registry lives in the hub's network namespace, which the
	// host's does not reach): http://127.0.0.1:PORT, forwarded into the
	// hub (registry_url in a swarm runtime block).
	RegistryURL string
	// Busybox is the busybox test image (dockertest's) in the registry,
	// pinned by digest, so every node runs the same image. It is on the
	// manager already; the workers pull it.
	Busybox string
	// StartTime is how long Start took to bring the fixture up.
	StartTime time.Duration

	id string // the owning process's pid: names the cgroups
	// procs are the namespaces' first processes (unshare), hub first; a
	// line on a stdin releases its script.
	procs []*nsfixture.Proc
}

// kind names what fixtures leave on the host: their directories and
// cgroups.
var kind = nsfixture.Kind{Name: "swarmtest", Dir: "bottlefile-swarm", Cgroup: "bottlefile-swarm-"}

// once is the fixture of this process, started by the first Start.
var once = nsfixture.Once[*Fixture]{
	Name:       "swarmtest",
	What:       "the test swarm",
	RequireEnv: RequireEnv,
	Up:         start,
	Started: func(f *Fixture) string {
		return fmt.Sprintf("swarmtest: 3 nodes and a registry up in %.1fs (%s)", f.StartTime.Seconds(), f.Dir)
	},
	Down: func(f *Fixture) error { return kind.Teardown(f.id, f.Dir, f.procs) },
}

// Main runs the package's tests and then stops the fixture if one was
// started: call it from TestMain.
func Main(m *testing.M) int { return once.Main(m) }

// Start returns the fixture of this test process, starting it the first
// time. When it cannot start, the test is skipped, or fails when
// BOTTLEFILE_REQUIRE_SWARM=1; later calls report the same error without
// trying again.
func Start(t testing.TB) *Fixture {
	t.Helper()
	return once.Start(t)
}

// Stop tears the fixture down, if one runs.
func Stop() { once.Stop() }

// Manager is the manager node.
func (f *Fixture) Manager() Node { return f.Nodes[0] }

// Client is a client of node i's engine (0 is the manager), closed when
// the test ends.
func (f *Fixture) Client(t testing.TB, i int) *client.Client {
	t.Helper()
	cli, err := newClient(f.Nodes[i].Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Cleanup registers a cleanup that removes everything carrying the
// lineage label from the swarm: services, then on every node the
// containers, networks and images.
func (f *Fixture) Cleanup(t testing.TB, lineage string) {
	t.Helper()
	if lineage == "" {
		t.Fatal("swarmtest.Cleanup: empty lineage would match nothing")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.RemoveLineage(ctx, lineage); err != nil {
			t.Errorf("cleaning up lineage %s: %v", lineage, err)
		}
	})
}

// RemoveLineage removes every service of the lineage, then, on every
// node, its containers and images, then its overlays and configs.
func (f *Fixture) RemoveLineage(ctx context.Context, lineage string) error {
	var errs []error
	mgr, err := newClient(f.Manager().Host)
	if err != nil {
		return err
	}
	defer mgr.Close()
	lf := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))
	services, err := mgr.ServiceList(ctx, swarm.ServiceListOptions{Filters: lf})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing services: %w", err))
	}
	for _, s := range services {
		if err := mgr.ServiceRemove(ctx, s.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing service %s: %w", s.Spec.Name, err))
		}
	}
	for _, n := range f.Nodes {
		cli, err := newClient(n.Host)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Containers and images; a worker's copies of overlays are the
		// manager's to remove.
		ctrs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: lf})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: listing containers: %w", n.Name, err))
		}
		for _, c := range ctrs {
			if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("%s: removing container %s: %w", n.Name, c.ID, err))
			}
		}
		imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: lf})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: listing images: %w", n.Name, err))
		}
		for _, img := range imgs {
			if _, err := cli.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("%s: removing image %s: %w", n.Name, img.ID, err))
			}
		}
		cli.Close()
	}
	// Overlay networks are the manager's to remove, once no task uses
	// them: the tasks of removed services go away shortly.
	configs, err := mgr.ConfigList(ctx, swarm.ConfigListOptions{Filters: lf})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing configs: %w", err))
	}
	for _, c := range configs {
		_ = mgr.ConfigRemove(ctx, c.ID) // in use until the services are gone: retried below
	}
	for range 50 {
		nets, err := mgr.NetworkList(ctx, network.ListOptions{Filters: lf})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing networks: %w", err))
			break
		}
		var left error
		for _, nw := range nets {
			if err := mgr.NetworkRemove(ctx, nw.ID); err != nil && !cerrdefs.IsNotFound(err) && !strings.HasSuffix(err.Error(), "not found") {
				left = fmt.Errorf("removing network %s: %w", nw.Name, err)
			}
		}
		configs, _ := mgr.ConfigList(ctx, swarm.ConfigListOptions{Filters: lf})
		for _, c := range configs {
			if err := mgr.ConfigRemove(ctx, c.ID); err != nil && !cerrdefs.IsNotFound(err) {
				left = fmt.Errorf("removing config %s: %w", c.Spec.Name, err)
			}
		}
		if left == nil {
			break
		}
		if ctx.Err() != nil {
			errs = append(errs, left)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// LineageObjects lists what carries the lineage label anywhere in the
// swarm, one line per object ("node2: container bf-1234-coder"): services
// and configs as the manager lists them, and every node's containers,
// networks (the manager's overlays, and each node's copies) and images.
// Empty means nothing is left.
func (f *Fixture) LineageObjects(ctx context.Context, lineage string) ([]string, error) {
	lf := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))
	var out []string
	for i, n := range f.Nodes {
		cli, err := newClient(n.Host)
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		if i == 0 {
			services, err := cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: lf})
			if err != nil {
				return nil, err
			}
			for _, s := range services {
				out = append(out, fmt.Sprintf("swarm: service %s", s.Spec.Name))
			}
			configs, err := cli.ConfigList(ctx, swarm.ConfigListOptions{Filters: lf})
			if err != nil {
				return nil, err
			}
			for _, c := range configs {
				out = append(out, fmt.Sprintf("swarm: config %s", c.Spec.Name))
			}
		}
		ctrs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: lf})
		if err != nil {
			return nil, err
		}
		for _, c := range ctrs {
			out = append(out, fmt.Sprintf("%s: container %s", n.Name, strings.Join(c.Names, ",")))
		}
		nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: lf})
		if err != nil {
			return nil, err
		}
		for _, nw := range nets {
			out = append(out, fmt.Sprintf("%s: network %s", n.Name, nw.Name))
		}
		imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: lf})
		if err != nil {
			return nil, err
		}
		for _, img := range imgs {
			out = append(out, fmt.Sprintf("%s: image %s %v", n.Name, img.ID, img.RepoTags))
		}
	}
	return out, nil
}

func newClient(host string) (*client.Client, error) {
	return client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
}

// The programs the fixture runs, with the Debian package that has each.
var programs = [][2]string{
	{"unshare", "util-linux"},
	{"ip", "iproute2"},
	{"dockerd", "docker.io"},
	{"docker-init", "docker.io (tini)"},
	{"docker-registry", "docker-registry"},
	{dockertest.BusyboxPath, "busybox-static"},
}

func start() (f *Fixture, err error) {
	t0 := time.Now()
	if runtime.GOOS != "linux" {
		return nil, errors.New("it needs Linux")
	}
	if err := nsfixture.Preflight(programs); err != nil {
		return nil, err
	}
	removeStale()

	id, dir, err := kind.Claim()
	if err != nil {
		return nil, err
	}
	f = &Fixture{Dir: dir, Registry: Registry, id: id}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, f.logTails())
			kind.Teardown(f.id, f.Dir, f.procs)
			f = nil
		}
	}()
	if err := os.Mkdir(filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(id)), 0o755); err != nil {
		return f, err
	}

	// The namespaces first, each held by a script that waits for its
	// network before it runs its daemon.
	regConf := filepath.Join(f.Dir, "registry.yml")
	if err := os.WriteFile(regConf, []byte(nsfixture.RegistryConfig(filepath.Join(f.Dir, "registry"), ":5000")), 0o644); err != nil {
		return f, err
	}
	hub, err := f.spawn("hub", hubScript, f.Dir, regConf, strconv.Itoa(len(NodeLabels)))
	if err != nil {
		return f, err
	}
	var nodes []*nsfixture.Proc
	for i := range NodeLabels {
		n := Node{
			Name:    fmt.Sprintf("node%d", i+1),
			Addr:    fmt.Sprintf("%s.%d", Underlay, i+1),
			Manager: i == 0,
			Labels:  maps.Clone(NodeLabels[i]),
		}
		dir := filepath.Join(f.Dir, n.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return f, err
		}
		n.Host = "unix://" + filepath.Join(dir, "docker.sock")
		cmd, err := f.spawn(n.Name, nodeScript, n.Name, n.Addr, dir, "/"+kind.CgroupName(id)+"/"+n.Name, Registry)
		if err != nil {
			return f, err
		}
		nodes = append(nodes, cmd)
		f.Nodes = append(f.Nodes, n)
	}
	// The veth pairs are made straight inside the namespaces: the host's
	// network namespace never holds them. unshare enters its namespaces
	// a moment after it starts; until then "netns PID" is the host's, and
	// the pair would be made there (eth0 exists: "File exists").
	for _, p := range append([]*nsfixture.Proc{hub}, nodes...) {
		if err := nsfixture.WaitOwnNetns(p.PID, 10*time.Second); err != nil {
			return f, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	var batch strings.Builder
	for i, cmd := range nodes {
		fmt.Fprintf(&batch, "link add n%d netns %d type veth peer name eth0 netns %d\n", i+1, hub.PID, cmd.PID)
	}
	if out, err := run(batch.String(), "ip", "-batch", "-"); err != nil {
		return f, fmt.Errorf("making the veth pairs: %v: %s", err, out)
	}
	for _, p := range f.procs {
		if _, err := io.WriteString(p.Stdin, "go\n"); err != nil {
			return f, fmt.Errorf("releasing %s: %w", p.Name, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	clis := make([]*client.Client, len(f.Nodes))
	for i, n := range f.Nodes {
		if clis[i], err = newClient(n.Host); err != nil {
			return f, err
		}
		defer clis[i].Close()
	}
	for i, n := range f.Nodes {
		if err := waitFor(ctx, func() error { _, err := clis[i].Ping(ctx); return err }, func() error { return f.alive() }); err != nil {
			return f, fmt.Errorf("%s's dockerd did not answer: %w", n.Name, err)
		}
	}

	// The swarm: one manager (two would lose quorum with either), a short
	// heartbeat so a dead node is noticed in seconds.
	mgr := clis[0]
	heartbeat := time.Second
	history := int64(1)
	if _, err := mgr.SwarmInit(ctx, swarm.InitRequest{
		ListenAddr:    f.Nodes[0].Addr + ":2377",
		AdvertiseAddr: f.Nodes[0].Addr,
		Spec: swarm.Spec{
			Dispatcher:    swarm.DispatcherConfig{HeartbeatPeriod: heartbeat},
			Orchestration: swarm.OrchestrationConfig{TaskHistoryRetentionLimit: &history},
		},
	}); err != nil {
		return f, fmt.Errorf("swarm init on %s: %w", f.Nodes[0].Name, err)
	}
	sw, err := mgr.SwarmInspect(ctx)
	if err != nil {
		return f, err
	}
	errc := make(chan error, len(f.Nodes))
	for i := 1; i < len(f.Nodes); i++ {
		go func() {
			err := clis[i].SwarmJoin(ctx, swarm.JoinRequest{
				ListenAddr: f.Nodes[i].Addr + ":2377", AdvertiseAddr: f.Nodes[i].Addr,
				RemoteAddrs: []string{f.Nodes[0].Addr + ":2377"}, JoinToken: sw.JoinTokens.Worker,
			})
			if err != nil {
				err = fmt.Errorf("%s joining the swarm: %w", f.Nodes[i].Name, err)
			}
			errc <- err
		}()
	}
	// The test image meanwhile: imported on the manager, pushed to the
	// registry; pinned by digest so every node runs the same image.
	imgErr := make(chan error, 1)
	go func() { imgErr <- f.pushBusybox(ctx, mgr) }()
	for i := 1; i < len(f.Nodes); i++ {
		if err := <-errc; err != nil {
			return f, err
		}
	}
	if err := f.labelNodes(ctx, mgr); err != nil {
		return f, err
	}
	if err := <-imgErr; err != nil {
		return f, err
	}
	if f.RegistryURL, err = forwardRegistry(hub.PID); err != nil {
		return f, err
	}
	f.StartTime = time.Since(t0)
	return f, nil
}

// labelNodes waits until every node is ready, records its id, and gives
// it its labels.
func (f *Fixture) labelNodes(ctx context.Context, mgr *client.Client) error {
	var list []swarm.Node
	err := waitFor(ctx, func() error {
		var err error
		if list, err = mgr.NodeList(ctx, swarm.NodeListOptions{}); err != nil {
			return err
		}
		ready := 0
		for _, n := range list {
			if n.Status.State == swarm.NodeStateReady {
				ready++
			}
		}
		if ready < len(f.Nodes) {
			return fmt.Errorf("%d of %d nodes ready", ready, len(f.Nodes))
		}
		return nil
	}, f.alive)
	if err != nil {
		return err
	}
	for _, sn := range list {
		i := slices.IndexFunc(f.Nodes, func(n Node) bool { return n.Name == sn.Description.Hostname })
		if i < 0 {
			return fmt.Errorf("the swarm has a node %q the fixture did not start", sn.Description.Hostname)
		}
		f.Nodes[i].ID = sn.ID
		spec := sn.Spec
		spec.Labels = maps.Clone(f.Nodes[i].Labels)
		if err := mgr.NodeUpdate(ctx, sn.ID, sn.Version, spec); err != nil {
			return fmt.Errorf("labelling %s: %w", f.Nodes[i].Name, err)
		}
	}
	return nil
}

// pushBusybox imports the busybox test image on the manager and pushes it
// to the registry (retrying while the registry starts).
func (f *Fixture) pushBusybox(ctx context.Context, mgr *client.Client) error {
	tag := BusyboxRepo + ":1"
	if _, err := dockertest.ImportBusybox(ctx, mgr, tag); err != nil {
		return err
	}
	var digest string
	err := waitFor(ctx, func() error {
		var err error
		digest, err = push(ctx, mgr, tag)
		return err
	}, f.alive)
	if err != nil {
		return fmt.Errorf("pushing %s: %w", tag, err)
	}
	f.Busybox = BusyboxRepo + "@" + digest
	return nil
}

// push pushes ref and returns the digest the registry gave it.
func push(ctx context.Context, cli *client.Client, ref string) (string, error) {
	rc, err := cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: "e30="}) // "{}": no credentials
	if err != nil {
		return "", err
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	digest := ""
	for {
		var m struct {
			Error string `json:"error"`
			Aux   struct {
				Digest string `json:"Digest"`
			} `json:"aux"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return "", err
		}
		if m.Error != "" {
			return "", errors.New(m.Error)
		}
		if m.Aux.Digest != "" {
			digest = m.Aux.Digest
		}
	}
	if digest == "" {
		return "", errors.New("the registry gave no digest")
	}
	return digest, nil
}

// waitFor polls try every 50 ms until it succeeds, ctx ends, or check
// (that the fixture's processes live) fails.
func waitFor(ctx context.Context, try, check func() error) error {
	return nsfixture.Poll(ctx, 50*time.Millisecond, try, check)
}

// alive says which of the fixture's namespaces has died.
func (f *Fixture) alive() error {
	for _, p := range f.procs {
		select {
		case <-p.Done:
			return fmt.Errorf("%s exited", p.Name)
		default:
		}
	}
	return nil
}

// logTails is the end of every log of the fixture, for a start that
// failed.
func (f *Fixture) logTails() string {
	logs, _ := filepath.Glob(filepath.Join(f.Dir, "*", "*.log"))
	more, _ := filepath.Glob(filepath.Join(f.Dir, "*.log"))
	return nsfixture.LogTails(append(more, logs...))
}

// spawn starts script as the first process of new network, PID, UTS and
// mount namespaces (with a /proc of their own), killed when this process
// dies. The script waits for a line on its stdin before it goes on. Its
// name is the last argument, for messages.
func (f *Fixture) spawn(name, script string, args ...string) (*nsfixture.Proc, error) {
	argv := append([]string{"--net", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc",
		"sh", "-c", script, name}, args...)
	env := append(os.Environ(), "SWARMTEST_CGROUP="+filepath.Join(nsfixture.CgroupRoot, "pids", kind.CgroupName(f.id)), "dockerdLoop="+dockerdLoop)
	p, err := nsfixture.Spawn(f.Dir, name, env, argv...)
	if p != nil {
		f.procs = append(f.procs, p)
	}
	return p, err
}

// hubScript runs in the hub's namespaces: "$0" is its name, $1 the
// fixture's directory, $2 the registry's config, $3 the number of nodes.
// It waits for the nodes' veth ends, bridges them, starts the outside
// host's HTTP server (busybox httpd daemonizes; it dies with the
// namespace), and runs the registry.
const hubScript = `set -e
read -r _
echo 0 > "$SWARMTEST_CGROUP/cgroup.procs"
ip link set lo up
ip addr add ` + Outside + `/32 dev lo
ip link add br0 type bridge
ip addr add ` + Underlay + `.254/24 dev br0
ip link set br0 up
i=1
while [ $i -le "$3" ]; do ip link set n$i master br0 up; i=$((i+1)); done
echo 1 > /proc/sys/net/ipv4/ip_forward
mkdir -p "$1/outside"
echo outside-ok > "$1/outside/index.html"
busybox httpd -p ` + Outside + `:80 -h "$1/outside"
exec docker-registry serve "$2" >"$1/registry.log" 2>&1
`

// nodeScript runs in a node's namespaces: $1 its hostname, $2 its
// address, $3 its directory, $4 its cgroup parent, $5 the registry.
//
// The fresh /sys shows this network namespace's devices to dockerd; the
// cgroup v1 hierarchies are mounted again on it (without them dockerd
// dies: "Devices cgroup isn't mounted"). The node has no default route,
// so image lookups elsewhere fail at once instead of timing out, and the
// swarm agent, which tries a pull before every task, then runs the image
// it has. (DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 is not set: with it the
// agent never pulls, not even from the registry.)
const nodeScript = `set -e
read -r _
mkdir -p "$SWARMTEST_CGROUP/$1" && echo 0 > "$SWARMTEST_CGROUP/$1/cgroup.procs"
cg=$(grep -E '^cgroup2? /sys/fs/cgroup/' /proc/self/mounts)
hostname "$1"
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
echo "$cg" | while read -r src mnt fstype opts rest; do
  mkdir -p "$mnt"
  o=$(echo "$opts" | tr , '\n' | grep -vE '^(rw|relatime)$' | paste -sd, -)
  if [ "$fstype" = cgroup2 ]; then mount -t cgroup2 cgroup2 "$mnt"; else mount -t cgroup -o "$o" cgroup "$mnt"; fi
done
ip link set lo up
ip addr add "$2/24" dev eth0
ip link set eth0 up
ip route add ` + Outside + `/32 via ` + Underlay + `.254
mkdir -p "$3/data" "$3/exec"
echo '{}' > "$3/daemon.json"
printf "%s\n" "$dockerdLoop" > "$3/dockerd.sh"
exec docker-init -s -- sh "$3/dockerd.sh" "$3" "$4" "$5"
`

// dockerdLoop runs a node's dockerd under the node's init ($1 its
// directory, $2 its cgroup parent, $3 the registry). When dockerd ends the
// node ends, unless KillNode killed it: then the loop waits for
// RestartNode and starts it again, with the containers the killed one
// left running (its containerd lives on: dockerd finds it again).
const dockerdLoop = `while :; do
  dockerd --config-file "$1/daemon.json" --data-root "$1/data" --exec-root "$1/exec" \
    --pidfile "$1/dockerd.pid" -H "unix://$1/docker.sock" --cgroup-parent "$2" --shutdown-timeout 1 \
    --insecure-registry "$3" --log-level warn >>"$1/dockerd.log" 2>&1 && rc=0 || rc=$?
  [ -e "$1/killed" ] || exit $rc
  while [ ! -e "$1/restart" ]; do sleep 0.1; done
  rm -f "$1/killed" "$1/restart"
done
`

func run(stdin string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// removeStale tears down the fixtures whose owner is gone: a test process
// killed before it could stop its fixture.
func removeStale() { kind.RemoveStale(nil, kind.Teardown) }

// TaskContainer finds the running container of the service's task on
// whichever node runs it, and returns that node's index and the
// container's id.
func (f *Fixture) TaskContainer(ctx context.Context, service string) (int, string, error) {
	flt := filters.NewArgs(filters.Arg("label", "com.docker.swarm.service.name="+service), filters.Arg("status", "running"))
	for i, n := range f.Nodes {
		cli, err := newClient(n.Host)
		if err != nil {
			return 0, "", err
		}
		list, err := cli.ContainerList(ctx, container.ListOptions{Filters: flt})
		cli.Close()
		if err != nil {
			return 0, "", err
		}
		if len(list) > 0 {
			return i, list[0].ID, nil
		}
	}
	return 0, "", fmt.Errorf("no node runs a container of service %s", service)
}
