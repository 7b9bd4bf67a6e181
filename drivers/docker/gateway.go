package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
)

// The egress gateway: one container per agent running "bottlefile gateway"
// (drivers/gateway has what every driver shares of it).
const (
	// labelKind marks containers that are not plain containers, so Read
	// reports them with their kind.
	labelKind = drivers.LabelPrefix + "kind"

	// Gateway container logs: json-file rotation, at most 3 files of 10 MB.
	gatewayLogSize = "10m"
	gatewayLogKeep = "3"
)

// gatewayResources are the gateway container's limits.
func gatewayResources() container.Resources {
	pids := int64(gateway.Pids)
	return container.Resources{
		Memory:     gateway.Memory,
		MemorySwap: gateway.Memory, // no swap beyond the limit
		NanoCPUs:   gateway.CPUs,
		PidsLimit:  &pids,
		Ulimits:    []*container.Ulimit{{Name: "nofile", Soft: gateway.NoFile, Hard: gateway.NoFile}},
	}
}

// gatewayName is the engine name of an agent's gateway container, derived
// from the lineage and the agent, so that the agent's proxy settings never
// change.
func gatewayName(lineage, agentAddr string) (string, error) {
	return engine.ObjectName(lineage, gateway.Addr(agentAddr), kindContainer)
}

// planGateway is an agent's gateway object.
func (d *Driver) planGateway(a drivers.AgentSpec, agentAddr, netAddr string, egressNet *drivers.Object, sidecars []string) (drivers.Object, error) {
	bin, err := d.gatewayBinary()
	if err != nil {
		return drivers.Object{}, err
	}
	ec, _ := d.egressConf()
	spec := gateway.Spec{
		Agent: a, AgentAddr: agentAddr, Network: netAddr,
		EgressNetwork: ec.network,
		Version:       bin.Version(),
		DNS:           cty.NullVal(cty.List(cty.String)),
		Sidecars:      sidecars,
		Credentials:   true,
	}
	if egressNet != nil {
		spec.EgressNetwork, spec.EgressObject = egressNet.Addr, true
	}
	if len(ec.dns) > 0 {
		vals := make([]cty.Value, len(ec.dns))
		for i, s := range ec.dns {
			vals[i] = cty.StringVal(s)
		}
		spec.DNS = cty.ListVal(vals)
	}
	return gateway.Plan(spec)
}

// gatewaySpec is a gateway object's attributes, decoded.
type gatewaySpec struct {
	name          string // the container's name
	agent         string // the agent's address
	allow         []string
	sidecars      []string // the bottle's sidecar names
	version       string   // the planned gatewayVersion
	network       string   // engine name of the bottle network
	egressNetwork string   // engine name of the egress network
	managed       bool     // the egress network is bottlefile's own
	egressAddr    string   // its address, when managed
	dns           []string
	ceiling       []string // nil for none
}

func decodeGateway(req drivers.ApplyRequest) (gatewaySpec, error) {
	a, err := gateway.DecodeAttrs(req.Object)
	if err != nil {
		return gatewaySpec{}, err
	}
	s := gatewaySpec{agent: a.Agent, allow: a.Allow, sidecars: a.Sidecars, version: a.Version, dns: a.DNS, ceiling: a.Ceiling}
	if s.name, err = gatewayName(req.Lineage, req.NamedAddr(s.agent)); err != nil {
		return s, err
	}
	if s.network, err = engine.ObjectName(req.Lineage, req.NamedAddr(a.Network), kindNetwork); err != nil {
		return s, fmt.Errorf("network: %w", err)
	}
	if isEgressNetworkAddr(a.EgressNetwork) {
		s.managed, s.egressAddr = true, a.EgressNetwork
		if s.egressNetwork, err = egressNetworkName(req.Lineage, req.NamedAddr(a.EgressNetwork)); err != nil {
			return s, fmt.Errorf("egress_network: %w", err)
		}
	} else {
		s.egressNetwork = a.EgressNetwork
	}
	return s, nil
}

// rulesTar is a tar holding the gateway's forbid file and rules file, for
// CopyToContainer into gateway.RulesDir.
func rulesTar(agent string, allow, sidecars []string, forbid []netip.Prefix, more ...tarFile) ([]byte, error) {
	rules, err := rulesTarFile(agent, allow, sidecars)
	if err != nil {
		return nil, err
	}
	return forbidTar(forbid, append(more, rules)...)
}

// rulesTarFile is the gateway's rules file.
func rulesTarFile(agent string, allow, sidecars []string) (tarFile, error) {
	data, err := gateway.RulesData(agent, allow, sidecars)
	if err != nil {
		return tarFile{}, err
	}
	return tarFile{name: gateway.RulesFile, data: data}, nil
}

// gatewayFiles writes a gateway's forbid, credentials and rules files
// into its gateway.RulesDir (in that order: the gateway takes them so), and
// returns the computed values that record the digests of the rules and
// credentials files (drivers.ComputedConfigPrefix): what the gateway
// reports in force (gatewayLoaded) is compared with them.
func gatewayFiles(ctx context.Context, api dockerAPI, id, agent string, allow, sidecars []string, forbid []netip.Prefix, creds tarFile) (map[string]string, error) {
	rules, err := rulesTarFile(agent, allow, sidecars)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	tarball, err := forbidTar(forbid, creds, rules)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if err := api.CopyToContainer(ctx, id, gateway.RulesDir, bytes.NewReader(tarball), container.CopyToContainerOptions{}); err != nil {
		return nil, fmt.Errorf("writing its rules file: %w", err)
	}
	return map[string]string{
		drivers.ComputedConfigPrefix + "rules":       egress.FileDigest(rules.data),
		drivers.ComputedConfigPrefix + "credentials": egress.FileDigest(creds.data),
	}, nil
}

type tarFile struct {
	name string
	data []byte
	mode int64 // 0 for 0644
}

// forbidTar is a tar holding the forbid file, then more files.
func forbidTar(forbid []netip.Prefix, more ...tarFile) ([]byte, error) {
	fdata, err := gateway.ForbidData(forbid)
	if err != nil {
		return nil, err
	}
	files := append([]tarFile{{name: gateway.ForbidFile, data: fdata}}, more...)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		mode := f.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: mode, Size: int64(len(f.data)), ModTime: time.Now()}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// lastAddr is the highest usable address of an IPv4 subnet: the gateway's
// fixed address on its bottle network (the engine hands out addresses from
// the bottom, so the agent and its sidecars never take it).
func lastAddr(p netip.Prefix) (netip.Addr, bool) {
	p = p.Masked()
	if !p.Addr().Is4() || p.Bits() > 30 {
		return netip.Addr{}, false
	}
	b := p.Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n |= (uint32(1) << (32 - p.Bits())) - 1 // broadcast
	n--
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// createGateway builds the gateway image when the engine lacks it, then
// creates the gateway container on the bottle network (with a fixed
// address it alone listens on, and the alias "gateway") and the egress
// network, writes its rules file, starts it and waits until it listens.
func (d *Driver) createGateway(ctx context.Context, api dockerAPI, pool netip.Prefix, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	spec, err := decodeGateway(req)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("creating gateway for %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("creating gateway %s for %s: %s", spec.name, addr, fmt.Sprintf(format, args...))
	}
	if err := d.checkIsolation(ctx, api); err != nil {
		return fail("%v", err)
	}
	bin, err := d.gatewayBinary()
	if err != nil {
		return fail("%v", err)
	}
	if now := bin.Version(); spec.version != "" && spec.version != now {
		return fail("the gateway binary %s changed since the plan (now %s, planned %s); plan again", bin.Path, now, spec.version)
	}
	nets, err := api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return fail("listing networks: %v", err)
	}
	bottle, ok := findNetwork(nets, spec.network)
	if !ok {
		return fail("its bottle network %s does not exist", spec.network)
	}
	var subnet netip.Prefix
	for _, c := range bottle.IPAM.Config {
		if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() {
			subnet = p
		}
	}
	ip, ok := lastAddr(subnet)
	if !ok {
		return fail("its bottle network %s has no IPv4 subnet with room for a gateway", spec.network)
	}
	out, ok := findNetwork(nets, spec.egressNetwork)
	if !ok {
		return fail("the egress network %s does not exist", spec.egressNetwork)
	}
	if spec.managed {
		if out, err = d.oneEgressNetwork(ctx, api, nets, spec.egressNetwork, req.Lineage, spec.egressAddr, req.NamedAddr(spec.egressAddr)); err != nil {
			return fail("%v", err)
		}
	}
	var managed netip.Prefix
	if spec.managed && len(out.IPAM.Config) > 0 {
		managed, _ = netip.ParsePrefix(out.IPAM.Config[0].Subnet)
	}
	forbid := d.gatewayForbid(ctx, api, req.Lineage, nets, pool, managed)
	credFile, err := d.credentialsFile(req.Lineage, req.NamedAddr(gateway.AgentOf(req.Object.Addr)), req.Object)
	if err != nil {
		return fail("%v", err)
	}
	credTar, err := credentialsTarFile(credFile)
	if err != nil {
		return fail("credentials: %v", err)
	}
	if _, err := rulesTarFile(spec.agent, spec.allow, spec.sidecars); err != nil {
		return fail("rules: %v", err)
	}

	listen := netip.AddrPortFrom(ip, gateway.Port).String()
	cmd := []string{"gateway", "-listen", listen, "-rules", gateway.RulesDir + "/" + gateway.RulesFile, "-forbid-file", gateway.RulesDir + "/" + gateway.ForbidFile, "-credentials", gateway.RulesDir + "/" + credentialsName,
		"-state", gateway.StatePath}
	for _, p := range forbid {
		cmd = append(cmd, "-forbid", p.String())
	}
	// The ceiling on the command line: neither the agent nor an edit of
	// the rules file can change it.
	cmd = append(cmd, gateway.CeilingArgs(spec.ceiling)...)
	labels := req.Labels()
	labels[labelKind] = gateway.Kind
	cfg := &container.Config{
		Cmd:  cmd,
		User: gateway.User,
		// The Go runtime collects harder as it nears this, well before the
		// container's memory limit.
		Env:    []string{fmt.Sprintf("GOMEMLIMIT=%dMiB", gateway.Memory*5/8>>20)},
		Labels: labels,
		Healthcheck: &container.HealthConfig{
			Test:     []string{"CMD", "/bottlefile", "gateway", "-health", "-listen", listen},
			Interval: 30 * time.Second,
			Timeout:  5 * time.Second,
			Retries:  3,
		},
	}
	hostCfg := &container.HostConfig{
		NetworkMode:   container.NetworkMode(spec.network),
		DNS:           spec.dns,
		CapDrop:       []string{"ALL"},
		SecurityOpt:   []string{"no-new-privileges"},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		Resources:     gatewayResources(),
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": gatewayLogSize, "max-file": gatewayLogKeep,
		}},
	}
	netCfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		spec.network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip.String()}, Aliases: []string{gateway.Alias}},
	}}
	created, err := d.createGatewayContainer(ctx, api, bin, cfg, hostCfg, netCfg, spec.name)
	if err != nil {
		return fail("%v", err)
	}
	for _, w := range created.Warnings {
		d.log.Warn("engine warning", "addr", addr, "warning", w)
	}
	cleanup := func() {
		if err := api.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("could not remove the gateway that failed to start", "addr", addr, "id", shortID(created.ID), "error", err)
		}
	}
	// By id: a name two networks carry (see oneEgressNetwork) is refused.
	if err := api.NetworkConnect(ctx, out.ID, created.ID, &network.EndpointSettings{}); err != nil {
		cleanup()
		return fail("connecting it to the egress network %s: %v", spec.egressNetwork, err)
	}
	applied, err := gatewayFiles(ctx, api, created.ID, spec.agent, spec.allow, spec.sidecars, forbid, credTar)
	if err != nil {
		cleanup()
		return fail("%v", err)
	}
	// Its files hold the forbid list: the others' pushes skip it unless
	// theirs differs (each was an archive write, 0.3-3 s of engine time on
	// fuse-overlayfs, to a gateway starting with the same list, issue 28).
	forbidSent(created.ID, forbid)
	gatewayStarting(created.ID, true)
	defer gatewayStarting(created.ID, false)
	if err := api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		cleanup()
		return fail("starting: %v", err)
	}
	if _, err := d.waitGateway(ctx, api, created.ID, spec.allow, credFile.Version, true); err != nil {
		cleanup()
		return fail("%v", err)
	}
	gatewayStarting(created.ID, false)
	// The others of this state learn of what this apply made (a network).
	d.pushForbid(ctx, api, req.Lineage, forbid)
	d.log.Info("created gateway", "addr", addr, "name", spec.name, "id", shortID(created.ID), "listen", listen, "allow", len(spec.allow), "forbid", len(forbid), "credentials", len(credFile.Credentials))
	resp, err := d.containerResponse(ctx, api, addr, created.ID, spec.network)
	if err != nil {
		return resp, err
	}
	resp.Computed["proxy"] = fmt.Sprintf("http://%s:%d", spec.name, gateway.Port)
	maps.Copy(resp.Computed, applied)
	return resp, nil
}

// updateGateway changes the allowlist in place: it writes the new rules
// file into the running gateway, signals it (SIGHUP re-reads at once) and
// waits until the gateway reports the new rules in force. The agent is not
// touched.
func (d *Driver) updateGateway(ctx context.Context, api dockerAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	id, err := containerRef(req)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("updating gateway of %s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("updating gateway %s of %s: %s", shortID(id), addr, fmt.Sprintf(format, args...))
	}
	allow, err := drivers.Strings(req.Object.Attr("allow"))
	if err != nil {
		return fail("allow: %v", err)
	}
	// The forbidden prefixes are computed again: networks made since the
	// gateway was are forbidden too.
	_, pool, err := d.engine(ctx)
	if err != nil {
		return fail("%v", err)
	}
	nets, err := api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return fail("listing networks: %v", err)
	}
	forbid := d.gatewayForbid(ctx, api, req.Lineage, nets, pool, netip.Prefix{})
	sidecars, err := drivers.Strings(req.Object.Attr("sidecars"))
	if err != nil {
		return fail("sidecars: %v", err)
	}
	credFile, err := d.credentialsFile(req.Lineage, req.NamedAddr(gateway.AgentOf(req.Object.Addr)), req.Object)
	if err != nil {
		return fail("%v", err)
	}
	credTar, err := credentialsTarFile(credFile)
	if err != nil {
		return fail("credentials: %v", err)
	}
	applied, err := gatewayFiles(ctx, api, id, gateway.AgentOf(addr), allow, sidecars, forbid, credTar)
	if err != nil {
		return fail("%v", err)
	}
	if err := api.ContainerKill(ctx, id, "HUP"); err != nil {
		return fail("signalling it to reload: %v", err)
	}
	closed, err := d.waitGateway(ctx, api, id, allow, credFile.Version, false)
	if err != nil {
		return fail("%v", err)
	}
	forbidSent(id, forbid)
	d.pushForbid(ctx, api, req.Lineage, forbid)
	d.log.Info("updated gateway", "addr", addr, "id", shortID(id), "allow", len(allow), "credentials", len(credFile.Credentials), "tunnels_closed", closed)
	resp, err := d.containerResponse(ctx, api, addr, id, "")
	if err != nil {
		return resp, err
	}
	if closed > 0 {
		resp.Notes = append(resp.Notes, fmt.Sprintf("closed %d open %s the new allowlist no longer allows", closed, plural(closed, "tunnel", "tunnels")))
	}
	if name := resp.Computed["name"]; name != "" {
		resp.Computed["proxy"] = fmt.Sprintf("http://%s:%d", name, gateway.Port)
	}
	maps.Copy(resp.Computed, applied)
	return resp, nil
}

// waitGateway reads the gateway's event log until the rules in force are
// allow (and, for a new gateway, it listens). A gateway that exits, or
// rejects its rules, is an error that quotes its log. It returns how many
// open tunnels the gateway closed as it took the rules (and the forbid file
// it reads just before them).
//
// A new gateway's log is followed (one stream, read as the gateway writes
// it): every event in it is this start's. An update polls the whole log,
// whose last rules event is the one that counts (an earlier one may name
// the same rules).
func (d *Driver) waitGateway(ctx context.Context, api dockerAPI, id string, allow []string, credVersion string, starting bool) (int, error) {
	want := gateway.NewWant(allow, credVersion)
	if starting {
		return d.followGateway(ctx, api, id, want)
	}
	deadline := time.Now().Add(gateway.Ready)
	var log string
	for {
		rc, err := api.ContainerLogs(ctx, id, container.LogsOptions{ShowStderr: true})
		if err != nil {
			return 0, fmt.Errorf("reading its log: %w", err)
		}
		var stderr bytes.Buffer
		_, err = stdcopy.StdCopy(io.Discard, &stderr, rc)
		rc.Close()
		if err != nil {
			return 0, fmt.Errorf("reading its log: %w", err)
		}
		log = stderr.String()
		var st gateway.Log
		for _, line := range strings.Split(log, "\n") {
			st.Add(line, want)
		}
		if st.Ready(false) {
			return st.Closed, nil
		}
		if time.Now().After(deadline) {
			if st.LastErr != "" {
				return 0, fmt.Errorf("the gateway did not take its rules: %s", st.LastErr)
			}
			return 0, fmt.Errorf("the gateway did not report its rules in force within %v; its log:\n%s", gateway.Ready, gateway.Indent(log))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// followGateway follows a new gateway's log until it listens with the
// rules want, it exits, or gateway.Ready passes. Following costs one stream
// per gateway where polling cost twenty calls a second, which at a hundred
// gateways starting at once kept the engine busy answering them.
func (d *Driver) followGateway(ctx context.Context, api dockerAPI, id string, want gateway.Want) (int, error) {
	wctx, cancel := context.WithTimeout(ctx, gateway.Ready)
	defer cancel()
	rc, err := api.ContainerLogs(wctx, id, container.LogsOptions{ShowStderr: true, Follow: true})
	if err != nil {
		return 0, fmt.Errorf("reading its log: %w", err)
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(io.Discard, pw, rc)
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	st, log := gateway.Follow(pr, want)
	if st.Ready(true) {
		return st.Closed, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if wctx.Err() != nil {
		if st.LastErr != "" {
			return 0, fmt.Errorf("the gateway did not take its rules: %s", st.LastErr)
		}
		return 0, fmt.Errorf("the gateway did not report its rules in force within %v; its log:\n%s", gateway.Ready, gateway.Indent(log))
	}
	// The stream ended: the gateway exited.
	info, err := api.ContainerInspect(ctx, id)
	if err == nil && info.State != nil {
		return 0, fmt.Errorf("the gateway exited (code %d); its log:\n%s", info.State.ExitCode, gateway.Indent(log))
	}
	return 0, fmt.Errorf("the gateway's log ended before it was ready; its log:\n%s", gateway.Indent(log))
}

// gatewayImage is engine.GatewayImage asked once per driver: once it made
// sure of the image, the gateways created after go straight to their
// create, and the engine says when the image went (another process's
// sweep): again asks anew. An inspect fewer per gateway, each made under
// a process-wide lock (issue 28).
func (d *Driver) gatewayImage(ctx context.Context, api dockerAPI, bin gateway.Binary, again bool) (string, error) {
	d.gatewayImageMu.Lock()
	defer d.gatewayImageMu.Unlock()
	if ref := bin.ImageRef(); !again && d.gatewayImageRef == ref {
		return ref, nil
	}
	d.gatewayImageRef = ""
	ref, err := engine.GatewayImage(ctx, api, bin, d.log)
	if err == nil {
		d.gatewayImageRef = ref
	}
	return ref, err
}

// createGatewayContainer creates the gateway container from the image of
// the binary at path, making the image first when it is missing. Another
// process's sweep can remove the image between making it and using it:
// then it is made again, up to gatewayImageAttempts times in all.
func (d *Driver) createGatewayContainer(ctx context.Context, api dockerAPI, bin gateway.Binary, cfg *container.Config, hostCfg *container.HostConfig, netCfg *network.NetworkingConfig, name string) (container.CreateResponse, error) {
	engine.GatewayImageUse.RLock()
	defer engine.GatewayImageUse.RUnlock()
	for attempt := 1; ; attempt++ {
		ref, err := d.gatewayImage(ctx, api, bin, attempt > 1)
		if err == nil {
			cfg.Image = ref
			var created container.CreateResponse
			created, err = d.createNamed(ctx, api, cfg.Labels[drivers.LabelLineage], cfg.Labels[drivers.LabelAddress], name, func() (container.CreateResponse, error) {
				return api.ContainerCreate(ctx, cfg, hostCfg, netCfg, nil, name)
			})
			if err == nil {
				return created, nil
			}
		}
		if !cerrdefs.IsNotFound(err) || attempt == gatewayImageAttempts {
			return container.CreateResponse{}, err
		}
		d.log.Debug("the gateway image went away before the container was created; making it again", "attempt", attempt, "error", err)
	}
}

// gatewayImageAttempts bounds createGatewayContainer's tries.
const gatewayImageAttempts = 3

// sweepTimeout bounds the sweep Close makes.
const sweepTimeout = 30 * time.Second

// sweepGatewayImages removes the gateway images no container uses, after a
// run deleted a gateway or a snapshot of the lineages given: they are
// shared by every state on the engine (one per bottlefile binary), so the
// last gateway to go takes its image along, and an upgrade leaves no old
// one behind. Except this binary's image while one of those lineages still
// has snapshot images on the engine: they are what its resume starts from,
// and that resume would import the image again (0.35-0.41 s of a
// one-bottle resume, issue 28). The run that deletes the lineage's last
// snapshot sweeps it. The engine refuses to remove an image a container
// uses; errors are only logged.
func (d *Driver) sweepGatewayImages(ctx context.Context, api dockerAPI, lineages []string) {
	engine.GatewayImageUse.Lock()
	defer engine.GatewayImageUse.Unlock()
	d.gatewayImageMu.Lock()
	d.gatewayImageRef = ""
	d.gatewayImageMu.Unlock()
	list, err := api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", gateway.ImageLabel+"=1"))})
	if err != nil {
		d.log.Debug("listing gateway images", "error", err)
		return
	}
	if len(list) == 0 {
		return
	}
	keep := ""
	if bin, err := d.gatewayBinary(); err == nil {
		for _, lineage := range lineages {
			if d.hasSnapshots(ctx, api, lineage) {
				keep = bin.ImageRef()
				break
			}
		}
	}
	for _, img := range list {
		if keep != "" && slices.Contains(img.RepoTags, keep) {
			d.log.Debug("kept the gateway image while snapshots are on the engine", "id", shortID(img.ID), "image", keep)
			continue
		}
		_, err := api.ImageRemove(ctx, img.ID, image.RemoveOptions{PruneChildren: true})
		switch {
		case err == nil:
			d.log.Info("removed the gateway image no container uses", "id", shortID(img.ID), "tags", strings.Join(img.RepoTags, ","))
		case cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err):
		default:
			d.log.Debug("could not remove a gateway image", "id", shortID(img.ID), "error", err)
		}
	}
}

// hasSnapshots says whether the engine holds snapshot images of lineage;
// true when it cannot tell: an import more is cheaper than a sweep that
// makes a resume import it.
func (d *Driver) hasSnapshots(ctx context.Context, api dockerAPI, lineage string) bool {
	snaps, err := api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", drivers.LabelLineage+"="+lineage),
		filters.Arg("label", labelSnapshotOf),
	)})
	if err != nil {
		d.log.Debug("listing snapshot images before the gateway image sweep", "lineage", lineage, "error", err)
		return true
	}
	return len(snaps) > 0
}

// sweepGatewaysOf asks Close to sweep the gateway images (a gateway or a
// snapshot of lineage was deleted).
func (d *Driver) sweepGatewaysOf(lineage string) {
	d.gatewaySweep.Store(lineage, true)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// gatewayForbid is what a gateway must never connect to, besides what the
// egress package refuses itself: forbidden's list, every internal
// network's subnet (every bottle, whatever its pool), every managed egress
// network's subnet (other gateways), the engine host's own addresses as
// the engine shows them (engineHostOwnAddrs: local socket or remote), and,
// for a remote engine, the addresses its name resolves to. It is computed
// again at each gateway create and update, so networks made after a
// gateway are forbidden to it too.
func (d *Driver) gatewayForbid(ctx context.Context, api dockerAPI, lineage string, nets []network.Summary, pool, managed netip.Prefix) []netip.Prefix {
	local := d.engineIsLocal()
	forbid := forbidden(nets, pool, managed, local)
	for _, n := range nets {
		if !n.Internal && !isEgressNetworkAddr(n.Labels[drivers.LabelAddress]) {
			continue
		}
		for _, c := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil {
				forbid = append(forbid, p.Masked())
			}
		}
	}
	for _, a := range d.engineHostOwnAddrs(ctx, api, lineage) {
		forbid = append(forbid, netip.PrefixFrom(a, a.BitLen()))
	}
	if !local {
		for _, a := range d.engineHostAddrs(ctx) {
			forbid = append(forbid, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return egress.CompactPrefixes(forbid)
}

// forbidCache remembers, per gateway container, the forbid list this
// process last gave it, so that pushForbid writes only what changed, and
// the gateways this process is starting. A SIGHUP that reaches a Go
// program before it asks for the signal kills it (exit 2, nothing in its
// log), so a starting gateway gets the file without the signal: it reads
// the file as it starts, or at its next poll.
var forbidCache = struct {
	sync.Mutex
	sent     map[string]string
	starting map[string]bool
}{sent: map[string]string{}, starting: map[string]bool{}}

// gatewayStarting marks a gateway this process is starting (on) or has
// seen ready or removed (off).
func gatewayStarting(id string, on bool) {
	forbidCache.Lock()
	defer forbidCache.Unlock()
	if on {
		forbidCache.starting[id] = true
	} else {
		delete(forbidCache.starting, id)
	}
}

func forbidKey(forbid []netip.Prefix) string {
	return egress.NewForbidFile(forbid).String()
}

func forbidSent(id string, forbid []netip.Prefix) {
	forbidCache.Lock()
	defer forbidCache.Unlock()
	forbidCache.sent[id] = forbidKey(forbid)
}

// pushParallelism is how many gateways pushForbid writes at once.
const pushParallelism = 8

// pushForbid gives the running gateways of lineage the forbid list when
// this process has not given it to them yet: a network this apply made is
// forbidden to the gateways made before it. Failures are logged: a gateway
// not reached keeps its list until its next update.
func (d *Driver) pushForbid(ctx context.Context, api dockerAPI, lineage string, forbid []netip.Prefix) {
	list, err := api.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", drivers.LabelLineage+"="+lineage),
		filters.Arg("label", labelKind+"="+gateway.Kind),
	)})
	if err != nil {
		d.log.Warn("listing gateways to update their forbidden prefixes", "error", err)
		return
	}
	key := forbidKey(forbid)
	tarball, err := forbidTar(forbid)
	if err != nil {
		d.log.Warn("could not update the gateways' forbidden prefixes", "error", err)
		return
	}
	// The gateways are written at the same time, a few at once: done one
	// after another they held up the last gateway of an apply (issue 28).
	var wg sync.WaitGroup
	sem := make(chan struct{}, pushParallelism)
	for _, c := range list {
		forbidCache.Lock()
		same, starting := forbidCache.sent[c.ID] == key, forbidCache.starting[c.ID]
		forbidCache.Unlock()
		if same || c.State != container.StateRunning {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(id string, starting bool) {
			defer func() { <-sem; wg.Done() }()
			err := api.CopyToContainer(ctx, id, gateway.RulesDir, bytes.NewReader(tarball), container.CopyToContainerOptions{})
			if err == nil && !starting {
				err = api.ContainerKill(ctx, id, "HUP")
			}
			if err != nil {
				d.log.Warn("could not update a gateway's forbidden prefixes", "id", shortID(id), "error", err)
				return
			}
			forbidSent(id, forbid)
			d.log.Debug("updated a gateway's forbidden prefixes", "id", shortID(id), "forbid", len(forbid))
		}(c.ID, starting)
	}
	wg.Wait()
}
