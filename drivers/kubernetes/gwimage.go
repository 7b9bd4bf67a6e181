package kubernetes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// pushGatewayImage pushes the gateway image of a binary (a FROM scratch
// image of one layer: gateway.WriteRootfs) to the registry, and returns
// its reference by digest. A variable, so that the node snapshot
// package's push (drivers/kubernetes/nodesnap) can take its place.
var pushGatewayImage = pushRootfs

// Media types of what pushRootfs writes (OCI image spec).
const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// pushRootfs pushes the gateway image through the registry's HTTP API
// (plain HTTP: the runtime's registry is one the nodes pull from as
// such), blob by blob, then the manifest tagged with the binary's SHA-256.
func pushRootfs(ctx context.Context, registry string, bin gateway.Binary) (string, error) {
	machine, err := bin.Check()
	if err != nil {
		return "", err
	}
	arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[machine]
	if arch == "" {
		return "", fmt.Errorf("the gateway binary %s is built for %s, which no node runs", bin.Path, machine)
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
	layerDigest := digestOf(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config": map[string]any{
			"Entrypoint": []string{"/bottlefile"},
			"Cmd":        []string{"gateway"},
			"User":       gateway.User,
			"Labels":     map[string]string{gateway.ImageLabel: "1", drivers.LabelPrefix + "gateway-binary": bin.Sum},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return "", err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        map[string]any{"mediaType": mediaConfig, "digest": digestOf(config), "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": mediaLayer, "digest": layerDigest, "size": layer.Len()}},
	})
	if err != nil {
		return "", err
	}
	host, repo := registryParts(registry, gateway.ImageRepo)
	r := &registryClient{base: "http://" + host, repo: repo, http: &http.Client{Timeout: 5 * time.Minute}}
	for _, blob := range [][]byte{layer.Bytes(), config} {
		if err := r.putBlob(ctx, blob); err != nil {
			return "", err
		}
	}
	if err := r.putManifest(ctx, bin.Sum, manifest); err != nil {
		return "", err
	}
	return registry + "/" + gateway.ImageRepo + "@" + digestOf(manifest), nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
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

type registryClient struct {
	base, repo string
	http       *http.Client
}

func (r *registryClient) do(ctx context.Context, method, u string, body []byte, ctype string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.ContentLength = int64(len(body))
	return r.http.Do(req)
}

func (r *registryClient) putBlob(ctx context.Context, blob []byte) error {
	digest := digestOf(blob)
	resp, err := r.do(ctx, http.MethodHead, r.base+"/v2/"+r.repo+"/blobs/"+digest, nil, "")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	resp, err = r.do(ctx, http.MethodPost, r.base+"/v2/"+r.repo+"/blobs/uploads/", nil, "")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("starting an upload to %s: %s", r.repo, resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return fmt.Errorf("the registry's upload location: %w", err)
	}
	base, _ := url.Parse(r.base)
	loc = base.ResolveReference(loc)
	q := loc.Query()
	q.Set("digest", digest)
	loc.RawQuery = q.Encode()
	resp, err = r.do(ctx, http.MethodPut, loc.String(), blob, "application/octet-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("uploading blob %s to %s: %s %s", digest, r.repo, resp.Status, msg)
	}
	return nil
}

func (r *registryClient) putManifest(ctx context.Context, tag string, manifest []byte) error {
	resp, err := r.do(ctx, http.MethodPut, r.base+"/v2/"+r.repo+"/manifests/"+tag, manifest, mediaManifest)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("pushing the manifest of %s:%s: %s %s", r.repo, tag, resp.Status, msg)
	}
	return nil
}
