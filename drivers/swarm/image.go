package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/image"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
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
	if err := pushImage(ctx, api, tag, ref); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("pushing the image of %s to the registry %s: %w", req.Object.Addr, registry, err)
	}
	d.log.Info("pushed image", "addr", req.Object.Addr, "ref", ref)
	resp.Computed["ref"] = ref
	return resp, nil
}

// builtRef is what a service of a built image runs: the image's tag in
// the registry, or on the manager without one.
func builtRef(lineage, addr, buildHash, registry string) (string, error) {
	tag, err := docker.ImageTag(lineage, addr+".image", buildHash)
	if err != nil {
		return "", err
	}
	if registry == "" {
		return tag, nil
	}
	return registry + "/" + tag, nil
}

// pushImage tags the manager's image src as ref and pushes ref.
func pushImage(ctx context.Context, api swarmAPI, src, ref string) error {
	if err := api.ImageTag(ctx, src, ref); err != nil {
		return fmt.Errorf("tagging %s as %s: %w", src, ref, err)
	}
	// "{}": no credentials. A registry that wants them is not supported yet.
	rc, err := api.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: "e30="})
	if err != nil {
		return err
	}
	defer rc.Close()
	return readPush(rc)
}

// readPush reads a push's progress stream to its end and returns the
// error it reports.
func readPush(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading the push's progress: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		}
		if m.Error != "" {
			return errors.New(strings.TrimSpace(m.Error))
		}
	}
}

// gatewayImage is the gateway image as services run it, made (and pushed)
// once per configured driver.
type gatewayImage struct {
	mu      sync.Mutex
	ref     string
	version string
}

// gatewayRef makes sure the gateway image is where the gateway services
// can run it: on the manager (the docker driver imports it), and with a
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
	local, version, err := d.eng.GatewayImage(ctx)
	if err != nil {
		return "", "", err
	}
	ref := local
	if registry != "" {
		ref = registry + "/" + local
		if err := pushImage(ctx, api, local, ref); err != nil {
			return "", "", fmt.Errorf("pushing the gateway image to the registry %s: %w", registry, err)
		}
	}
	g.ref, g.version = ref, version
	return ref, version, nil
}
