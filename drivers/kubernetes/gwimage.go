package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/nodesnap"
)

// pushGatewayImage pushes the gateway image of a binary to the registry
// and returns its reference by digest: a variable, so that a test
// without a registry can replace it.
var pushGatewayImage = pushRootfs

// pushRootfs pushes the gateway image, FROM scratch and of one layer
// (gateway.WriteRootfs), through nodesnap.PushImage, tagged with the
// binary's SHA-256 (gateway.Binary.ImageRef's tag) and named by digest.
// The registry is spoken to over plain HTTP when it is on loopback or a
// private address, else over HTTPS (nodesnap.Registry).
func pushRootfs(ctx context.Context, registry string, bin gateway.Binary) (string, error) {
	if _, err := bin.Check(); err != nil {
		return "", err
	}
	f, err := os.Open(bin.Path)
	if err != nil {
		return "", fmt.Errorf("reading the gateway binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	var layer bytes.Buffer
	if err := gateway.WriteRootfs(&layer, f, st.Size()); err != nil {
		return "", fmt.Errorf("writing the gateway's root file system: %w", err)
	}
	data := layer.Bytes()
	host, repo := registryParts(registry, gateway.ImageRepo)
	dgst, err := nodesnap.PushImage(ctx, nodesnap.Registry{Host: host}, repo, bin.Sum, []nodesnap.Layer{{
		DiffID: digest.FromBytes(data),
		Size:   int64(len(data)),
		Open:   func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
	}}, ocispec.ImageConfig{
		Entrypoint: []string{"/bottlefile"},
		Cmd:        []string{"gateway"},
		User:       gateway.User,
		Labels:     map[string]string{gateway.ImageLabel: "1", drivers.LabelPrefix + "gateway-binary": bin.Sum},
	})
	if err != nil {
		return "", err
	}
	return registry + "/" + gateway.ImageRepo + "@" + dgst, nil
}

// registryParts splits a registry address (HOST[:PORT][/PATH]) into its
// host and the repository path of name below it.
func registryParts(registry, name string) (host, repo string) {
	host, path, _ := strings.Cut(registry, "/")
	if path != "" {
		return host, path + "/" + name
	}
	return host, name
}
