package swarm

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// createImage builds an image on the manager's engine (the docker driver
// does, as it builds for its own containers), then, with a registry, tags
// it into the registry and pushes it, so every node can pull it.
func (d *Driver) createImage(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	resp, err := d.eng.Apply(ctx, req)
	if err != nil {
		return resp, err
	}
	tag := resp.Computed["tag"]
	_, registry, _, _ := d.settings()
	if registry == "" {
		resp.Computed["ref"] = tag
		return resp, nil
	}
	ref := registry + "/" + tag
	pb := d.bound(ctx, "the push to the registry "+registry, d.nodeTimeout())
	err = pushImage(pb.ctx, api, tag, ref, pb)
	pb.release()
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("pushing the image of %s to the registry %s: %w", req.Object.Addr, registry, pb.err(err))
	}
	d.log.Info("pushed image", "addr", req.Object.Addr, "ref", ref)
	resp.Computed["ref"] = ref
	return resp, nil
}

// deleteImage removes a built image from the registry (by digest), then
// from the manager (the docker driver does, with its registry tag), then
// from every other node engine the driver reaches (node_hosts), which
// pulled it to run a task. Without node_hosts, the copies the nodes
// pulled stay there: the apply says so. The registry goes first: when
// it cannot be reached the delete fails with the image still on the
// manager, where the next delete finds its tag again.
func (d *Driver) deleteImage(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	if err := d.deleteBuiltFromRegistry(ctx, api, req); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting image of %s: %w", req.Object.Addr, err)
	}
	resp, err := d.eng.Apply(ctx, req)
	if err != nil {
		return resp, err
	}
	// The nodes that pulled it, but the manager's (done): one that
	// cannot be reached keeps its copy, recorded (nodecopy.go).
	var engines []string
	mgr, _ := d.facts(ctx)
	for _, node := range d.engineNodes(ctx) {
		if node != mgr.Description.Hostname {
			engines = append(engines, node)
		}
	}
	if req.ID != "" {
		for _, node := range engines {
			d.removeCopy(ctx, api, req.Lineage, req.Object.Addr, nodeCopy{Node: node, Image: req.ID})
		}
	}
	if _, registry, _, _ := d.settings(); registry != "" && len(engines) == 0 {
		resp.Notes = append(resp.Notes, "the nodes that pulled the image keep their copy: set node_hosts in the runtime block so bottlefile can remove them, or docker image prune on each node")
	}
	return resp, nil
}

// deleteBuiltFromRegistry deletes the manifests of the registry tags the
// manager's image req.ID has (REGISTRY/bf-<lineage[:8]>-<agent>:<hash>),
// by digest. An image the manager no longer has is left to the registry.
func (d *Driver) deleteBuiltFromRegistry(ctx context.Context, api swarmAPI, req drivers.ApplyRequest) error {
	_, registry, _, _ := d.settings()
	d.mu.RLock()
	reg := d.regAPI
	d.mu.RUnlock()
	if registry == "" || reg == nil || req.ID == "" {
		return nil
	}
	f := byLineage(req.Lineage)
	f.Add("label", drivers.LabelAddress+"="+req.Object.Addr)
	list, err := api.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return err
	}
	prefix := "bf-" + drivers.LineagePrefix(req.Lineage) + "-"
	for _, img := range list {
		if img.ID != req.ID {
			continue
		}
		for _, rt := range img.RepoTags {
			name, ok := strings.CutPrefix(rt, registry+"/")
			i := strings.LastIndex(name, ":")
			if !ok || i < 0 || !strings.HasPrefix(name, prefix) {
				continue
			}
			if err := reg.deleteTagged(ctx, name[:i], name[i+1:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// builtRef is what a service of a built image runs: the image's tag in
// the registry, or on the manager without one.
func builtRef(lineage, addr, buildHash, registry string) (string, error) {
	tag, err := engine.ImageTag(lineage, addrs.ImageOf(addr), buildHash)
	if err != nil {
		return "", err
	}
	if registry == "" {
		return tag, nil
	}
	return registry + "/" + tag, nil
}

// pushImage tags the manager's image src as ref and pushes ref.
func pushImage(ctx context.Context, api swarmAPI, src, ref string, b *bounded) error {
	if err := api.ImageTag(ctx, src, ref); err != nil {
		return fmt.Errorf("tagging %s as %s: %w", src, ref, err)
	}
	// "{}": no credentials. A registry that wants them is not supported yet.
	rc, err := api.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: "e30="})
	if err != nil {
		return err
	}
	defer rc.Close()
	return engine.ReadProgress(b.reader(rc))
}

// gatewayImage is the gateway image as services run it, made (and pushed)
// once per configured driver.
type gatewayImage struct {
	mu      sync.Mutex
	ref     string
	version string
}

// gatewayBinary is the bottlefile binary the gateways run (gateway_binary,
// else the running executable), read once per configured driver.
func (d *Driver) gatewayBinary() (gateway.Binary, error) {
	d.mu.RLock()
	g := d.gwBinary
	d.mu.RUnlock()
	if g == nil { // not configured
		return gateway.ReadBinary("")
	}
	g.once.Do(func() { g.bin, g.err = gateway.ReadBinary(g.path) })
	return g.bin, g.err
}

// binaryOnce is the gateway binary of a configured driver.
type binaryOnce struct {
	path string // gateway_binary; "" for the running executable
	once sync.Once
	bin  gateway.Binary
	err  error
}

// gatewayRef makes sure the gateway image is where the gateway services
// can run it: on the manager (imported there, drivers/engine), and with a
// registry, pushed there.
func (d *Driver) gatewayRef(ctx context.Context, api swarmAPI) (string, string, error) {
	d.mu.RLock()
	g, registry := d.gwImage, d.registry
	d.mu.RUnlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ref != "" {
		return g.ref, g.version, nil
	}
	bin, err := d.gatewayBinary()
	if err != nil {
		return "", "", err
	}
	cli, err := d.eng.Client(ctx)
	if err != nil {
		return "", "", err
	}
	engine.GatewayImageUse.RLock()
	local, err := engine.GatewayImage(ctx, cli, bin, d.log)
	engine.GatewayImageUse.RUnlock()
	if err != nil {
		return "", "", err
	}
	version := bin.Version()
	ref := local
	if registry != "" {
		ref = registry + "/" + local
		pb := d.bound(ctx, "the push to the registry "+registry, d.nodeTimeout())
		err := pushImage(pb.ctx, api, local, ref, pb)
		pb.release()
		if err != nil {
			return "", "", fmt.Errorf("pushing the gateway image to the registry %s: %w", registry, pb.err(err))
		}
	}
	g.ref, g.version = ref, version
	return ref, version, nil
}
