package docker

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// kindHostProbe marks the short-lived container that reads the engine
// host's addresses (probeEngineHost).
const kindHostProbe = "host-probe"

// labelProbeRun tells one probe from those a killed run left
// (removeLeftProbes): this process's id and a random number.
const labelProbeRun = drivers.LabelPrefix + "probe-run"

// hostProbeTimeout bounds the probe: a container that prints a few lines.
const hostProbeTimeout = 30 * time.Second

// engineHost caches, per configured driver, the engine host's own
// addresses: the probe runs one container, once per process.
type engineHost struct {
	mu    sync.Mutex // guards the rest
	done  bool
	addrs []netip.Addr
}

// engineHostOwnAddrs are the addresses of the machine the engine runs on,
// learned from the engine itself rather than from where bottlefile runs:
// an engine behind a local socket may live in a VM (Docker Desktop, colima)
// or another network namespace, whose addresses this machine's interfaces
// do not show, and a remote engine's host has addresses besides the one
// its name resolves to. Two sources:
//
//   - a container in the host's network namespace (network_mode host,
//     the gateway image, no capabilities) prints that namespace's
//     interface addresses and default gateways (gateway -print-addrs):
//     in a VM, the default gateway is the machine the VM runs on;
//   - the engine's info: the swarm node address it advertises.
//
// Loopback and link-local addresses are left out: the gateway refuses them
// whatever it is told. A probe that fails (an engine that refuses host
// networking) is logged, and the other sources still count.
func (d *Driver) engineHostOwnAddrs(ctx context.Context, api dockerAPI, lineage string) []netip.Addr {
	d.mu.RLock()
	h := d.host
	d.mu.RUnlock()
	if h == nil {
		h = &engineHost{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return h.addrs
	}
	var addrs []netip.Addr
	start := time.Now()
	// The engine's info while the probe runs: they do not wait for each
	// other (issue 28).
	nodeAddr := make(chan netip.Addr, 1)
	go func() {
		var a netip.Addr
		if info, err := api.Info(ctx); err == nil {
			a, _ = netip.ParseAddr(info.Swarm.NodeAddr)
		}
		nodeAddr <- a.Unmap()
	}()
	// Probed at every run that makes or updates a gateway, never kept
	// between runs: an address the engine host gained since (a VM's new
	// interface, a namespace's veth) must be refused at once, and the
	// probe runs in the background from the egress network's create.
	probed, err := d.probeEngineHost(ctx, api, lineage)
	if err != nil {
		d.log.Warn("cannot learn the engine host's addresses from the engine to forbid them to gateways; only the addresses bottlefile sees itself are forbidden", "error", err)
	}
	addrs = append(addrs, probed...)
	if a := <-nodeAddr; a.IsValid() {
		addrs = append(addrs, a)
	}
	h.done, h.addrs = true, hostAddrsOnly(addrs)
	d.log.Debug("engine host addresses", "addrs", h.addrs, "probed", err == nil, "took", time.Since(start).Round(time.Millisecond))
	return h.addrs
}

// prefetchEngineHost learns the engine host's addresses in the background,
// so that a first gateway does not wait for the probe after its networks
// are made: called when the egress network is created. Detached from the
// step's context, so that a cancelled step does not leave the process
// with an empty answer; the probe bounds itself (hostProbeTimeout).
func (d *Driver) prefetchEngineHost(ctx context.Context, api dockerAPI, lineage string) {
	d.background(func() { d.engineHostOwnAddrs(context.WithoutCancel(ctx), api, lineage) })
}

// background runs f in its own goroutine; Close waits for it. Once Close
// has begun, f runs at once instead: a goroutine added then could outlive
// Close's wait (a refresh that went on without the engine's identity asks
// for it while the command closes its drivers).
func (d *Driver) background(f func()) {
	d.mu.RLock()
	closed := d.api == nil
	if !closed {
		d.hostWG.Add(1)
	}
	d.mu.RUnlock()
	if closed {
		f()
		return
	}
	go func() {
		defer d.hostWG.Done()
		f()
	}()
}

// probeEngineHost runs the gateway binary with -print-addrs in the engine
// host's network namespace and returns what it printed. The container is
// labelled with the lineage and its kind, and removed before returning.
func (d *Driver) probeEngineHost(ctx context.Context, api dockerAPI, lineage string) ([]netip.Addr, error) {
	bin, err := d.gatewayBinary()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, hostProbeTimeout)
	defer cancel()
	// A probe a killed apply left is removed, while this one is made (it
	// has no name to take): no other process probes for this lineage
	// while this one holds the state's lock.
	run := fmt.Sprintf("%d-%x", os.Getpid(), rand.Uint64())
	d.background(func() { d.removeLeftProbes(context.WithoutCancel(ctx), api, lineage, run) })
	cfg := &container.Config{
		Cmd:    []string{"gateway", "-print-addrs"},
		User:   gateway.User,
		Labels: map[string]string{drivers.LabelLineage: lineage, labelKind: kindHostProbe, labelProbeRun: run},
	}
	hostCfg := &container.HostConfig{
		NetworkMode: "host",
		// An engine with user namespaces refuses the host's network
		// namespace unless the container stays in the host's user
		// namespace; it runs unprivileged either way.
		UsernsMode:  "host",
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		LogConfig:   container.LogConfig{Type: "json-file"},
	}
	created, err := d.createGatewayContainer(ctx, api, bin, cfg, hostCfg, nil, "")
	if err != nil {
		return nil, fmt.Errorf("creating a container in the engine host's network namespace: %w", err)
	}
	// Removed once read, in the background: the gateways wait for the
	// answer, not for the removal (issue 28). Close waits for it.
	defer d.background(func() {
		if err := api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true}); err != nil {
			d.log.Warn("could not remove the engine host probe", "id", shortID(created.ID), "error", err)
		}
	})
	if err := api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("starting a container in the engine host's network namespace: %w", err)
	}
	rc, err := api.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return nil, fmt.Errorf("reading the engine host probe: %w", err)
	}
	var out, errb bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &errb, rc)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the engine host probe: %w", err)
	}
	insp, err := api.ContainerInspect(ctx, created.ID)
	if err != nil {
		return nil, fmt.Errorf("inspecting the engine host probe: %w", err)
	}
	if insp.State == nil || insp.State.Running || insp.State.ExitCode != 0 {
		code := -1
		if insp.State != nil {
			code = insp.State.ExitCode
		}
		return nil, fmt.Errorf("the engine host probe ended with code %d: %s", code, strings.TrimSpace(errb.String()))
	}
	return parseHostAddrs(out.String())
}

// removeLeftProbes removes the engine host probes of lineage a killed run
// left behind: no other process probes for this lineage while this one
// holds the state's lock. It runs beside this process's own probe, which
// it tells by labelProbeRun and leaves alone.
func (d *Driver) removeLeftProbes(ctx context.Context, api dockerAPI, lineage, run string) {
	ctx, cancel := context.WithTimeout(ctx, hostProbeTimeout)
	defer cancel()
	probeLabels := filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage), filters.Arg("label", labelKind+"="+kindHostProbe))
	left, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: probeLabels})
	if err != nil {
		return
	}
	for _, c := range left {
		if c.Labels[labelProbeRun] != run {
			api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	}
}

// parseHostAddrs reads -print-addrs's output: one address a line.
func parseHostAddrs(out string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		a, err := netip.ParseAddr(line)
		if err != nil {
			return nil, fmt.Errorf("the engine host probe printed %q, not an address", line)
		}
		addrs = append(addrs, a.Unmap())
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("the engine host probe printed no address")
	}
	return addrs, nil
}

// hostAddrsOnly drops what the gateway refuses anyway, and duplicates.
func hostAddrsOnly(addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		if !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() || seen[a] {
			continue
		}
		seen[a] = true
		out = append(out, a)
	}
	return out
}
