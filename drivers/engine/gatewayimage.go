package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"

	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// GatewayImageAPI is what making a gateway image asks of an engine.
type GatewayImageAPI interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	Info(ctx context.Context) (system.Info, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
}

// gatewayImageMu serializes making gateway images within the process.
var gatewayImageMu sync.Mutex

// GatewayImageUse is held shared from making sure the gateway image exists
// until what runs it (a container, a pushed copy) uses it, and exclusively
// by a sweep that removes unused gateway images, so the sweep never takes
// an image from under a create of this process.
var GatewayImageUse sync.RWMutex

// GatewayImage makes sure the engine has the gateway image of the binary
// bin, and returns its reference (bin.ImageRef). The image is FROM
// scratch (gateway.WriteRootfs), imported, not built, so no builder and
// no registry are involved. A binary that cannot run there (not a static
// Linux executable, or built for another machine than the engine's) is
// an error that says how to get one. The caller holds GatewayImageUse
// shared until it has used the image.
func GatewayImage(ctx context.Context, api GatewayImageAPI, bin gateway.Binary, log hclog.Logger) (string, error) {
	ref := bin.ImageRef()
	gatewayImageMu.Lock()
	defer gatewayImageMu.Unlock()
	if _, err := api.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspecting the gateway image %s: %w", ref, err)
	}
	machine, err := bin.Check()
	if err != nil {
		return "", err
	}
	if info, err := api.Info(ctx); err == nil {
		if err := gateway.CheckMachine(bin.Path, machine, info.Architecture); err != nil {
			return "", err
		}
	}
	f, err := os.Open(bin.Path)
	if err != nil {
		return "", fmt.Errorf("reading the gateway binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading the gateway binary: %w", err)
	}

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(gateway.WriteRootfs(pw, f, st.Size())) }()
	if log != nil {
		log.Info("importing the gateway image", "image", ref, "binary", bin.Path)
	}
	rc, err := api.ImageImport(ctx, image.ImportSource{Source: pr, SourceName: "-"}, ref, image.ImportOptions{
		Message: "bottlefile egress gateway",
		Changes: bin.ImageChanges(),
	})
	if err == nil {
		err = ReadProgress(rc)
		rc.Close()
	}
	pr.Close()
	if err != nil {
		return "", fmt.Errorf("importing the gateway image %s: %w", ref, err)
	}
	if _, err := api.ImageInspect(ctx, ref); err != nil {
		return "", fmt.Errorf("inspecting the gateway image %s after importing it: %w", ref, err)
	}
	return ref, nil
}

// ReadProgress reads an engine's progress stream (an import's, a push's)
// to its end and returns the error it reports.
func ReadProgress(r io.Reader) error {
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
			return fmt.Errorf("reading the engine's progress stream: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(strings.TrimSpace(m.ErrorDetail.Message))
		}
		if m.Error != "" {
			return errors.New(strings.TrimSpace(m.Error))
		}
	}
}
