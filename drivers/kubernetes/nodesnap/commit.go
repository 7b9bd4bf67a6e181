package nodesnap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/rootfs"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bottlefile/bottlefile/drivers"
)

// Node is how a node's containerd is reached.
type Node struct {
	// Socket is containerd's gRPC socket on the node: a path, or
	// unix://PATH.
	Socket string
	// Namespace is containerd's namespace of the node's containers:
	// "k8s.io" (the CRI's) when empty.
	Namespace string
}

// DefaultNamespace is the containerd namespace the CRI keeps Kubernetes'
// containers and images in.
const DefaultNamespace = "k8s.io"

func (n Node) namespace() string {
	if n.Namespace == "" {
		return DefaultNamespace
	}
	return n.Namespace
}

func (n Node) address() string { return strings.TrimPrefix(n.Socket, "unix://") }

// Labels of a snapshot image (in its config, so the registry's copy and
// any engine that pulls it carry them), as the other drivers' snapshots
// have them.
const (
	// LabelSnapshotOf names the agent the image is a snapshot of; the
	// same label as drivers/engine.LabelSnapshotOf (a test holds them
	// equal).
	LabelSnapshotOf = drivers.LabelPrefix + "snapshot-of"
)

// Ref says where a snapshot goes and whose it is.
type Ref struct {
	Registry Registry
	// Repo is the repository in the registry ("bottlefile/agent-x").
	Repo string
	// Tag, when set, is put on the pushed manifest as well; the push
	// itself is by digest.
	Tag string
	// Lineage, Agent (the agent's address) and Address (the snapshot's)
	// become the image's labels.
	Lineage, Agent, Address string
	// Uncompressed pushes the new layer as a plain tar instead of gzip.
	// The node's containerd compresses with one core: a Commit of 100
	// MiB of random bytes to a loopback registry took 15.5 s gzipped and
	// 3.6 s plain (the diff alone 11.4 s and 1.3 s) on a 2-core machine
	// at load 20 (BenchmarkCommit), for a layer as large as the files it
	// holds and as many bytes to pull.
	Uncompressed bool
}

func (r Ref) check() error {
	if err := r.Registry.check(); err != nil {
		return err
	}
	if err := checkRepo(r.Repo); err != nil {
		return err
	}
	if r.Tag != "" && !validTag.MatchString(r.Tag) {
		return fmt.Errorf("tag %q is not a registry tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})", r.Tag)
	}
	if r.Lineage == "" || r.Agent == "" || r.Address == "" {
		return errors.New("a snapshot needs its lineage, agent and address: they label the image")
	}
	return nil
}

func (r Ref) labels() map[string]string {
	return map[string]string{
		drivers.LabelLineage: r.Lineage,
		drivers.LabelAddress: r.Address,
		LabelSnapshotOf:      r.Agent,
	}
}

// dial connects to the node's containerd.
func dial(ctx context.Context, node Node) (*containerd.Client, error) {
	if node.address() == "" {
		return nil, errors.New("no containerd socket given for the node")
	}
	c, err := containerd.New(node.address(), containerd.WithDefaultNamespace(node.namespace()), containerd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("reaching the node's containerd at %s: %w", node.Socket, err)
	}
	return c, nil
}

// commitLease bounds how long a commit's blobs outlive a commit killed
// before it could release its lease.
const commitLease = time.Hour

// Commit takes the writable layer of container containerID (its id in the
// node's containerd: the part of a Pod's ContainerStatuses[].ContainerID
// after "containerd://"), makes an image of the container's image plus
// that layer, labelled with ref's lineage, agent and address, and pushes
// it to ref's registry by digest (and tag, when ref has one). It returns
// the manifest's digest and the size of the new layer as pushed
// (compressed). The container may be running: its files are read as they
// are at that moment, not frozen (pause it first for a consistent copy).
func Commit(ctx context.Context, node Node, containerID string, ref Ref) (dgst string, size int64, err error) {
	if err := ref.check(); err != nil {
		return "", 0, err
	}
	if containerID == "" {
		return "", 0, errors.New("no container id given")
	}
	c, err := dial(ctx, node)
	if err != nil {
		return "", 0, err
	}
	defer c.Close()
	ctx = namespaces.WithNamespace(ctx, node.namespace())
	ctx, release, err := c.WithLease(ctx, leases.WithRandomID(), leases.WithExpiration(commitLease))
	if err != nil {
		return "", 0, fmt.Errorf("taking a lease on the node's containerd %s: %w", node.Socket, err)
	}
	defer func() { _ = release(context.WithoutCancel(ctx)) }()

	ctr, err := c.ContainerService().Get(ctx, containerID)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", 0, fmt.Errorf("the node's containerd %s has no container %s in namespace %s", node.Socket, containerID, node.namespace())
		}
		return "", 0, fmt.Errorf("reading container %s: %w", containerID, err)
	}
	if ctr.SnapshotKey == "" || ctr.Snapshotter == "" {
		return "", 0, fmt.Errorf("container %s has no root file system snapshot to take", containerID)
	}
	sn := c.SnapshotService(ctr.Snapshotter)
	st, err := sn.Stat(ctx, ctr.SnapshotKey)
	if err != nil {
		return "", 0, fmt.Errorf("reading the snapshot %s of container %s: %w", ctr.SnapshotKey, containerID, err)
	}
	cs := c.ContentStore()
	base, err := baseImage(ctx, c, ctr, st.Parent)
	if err != nil {
		return "", 0, err
	}

	layer, err := rootfs.CreateDiff(ctx, ctr.SnapshotKey, sn, c.DiffService(),
		diff.WithMediaType(diffMediaType(ref.Uncompressed)),
		diff.WithReference("bottlefile-commit-"+containerID))
	if err != nil {
		return "", 0, fmt.Errorf("taking the changed files of container %s: %w", containerID, err)
	}
	diffID := layer.Digest
	if !ref.Uncompressed {
		if diffID, err = uncompressedDigest(ctx, cs, layer); err != nil {
			return "", 0, err
		}
	}

	cfgBytes, err := snapshotConfig(base.config, diffID, ref.labels(), ref.Address)
	if err != nil {
		return "", 0, err
	}
	cfgDesc := ocispec.Descriptor{MediaType: base.manifest.Config.MediaType, Digest: digest.FromBytes(cfgBytes), Size: int64(len(cfgBytes))}
	if cfgDesc.MediaType == "" {
		cfgDesc.MediaType = ocispec.MediaTypeImageConfig
	}
	m := base.manifest
	m.Config = cfgDesc
	m.Layers = append(append([]ocispec.Descriptor(nil), base.manifest.Layers...), ocispec.Descriptor{MediaType: layerMediaType(m.MediaType, ref.Uncompressed), Digest: layer.Digest, Size: layer.Size})
	m.Annotations = nil
	mBytes, err := json.Marshal(m)
	if err != nil {
		return "", 0, err
	}
	mDesc := ocispec.Descriptor{MediaType: manifestMediaType(m.MediaType), Digest: digest.FromBytes(mBytes), Size: int64(len(mBytes))}
	if err := content.WriteBlob(ctx, cs, "bottlefile-config-"+cfgDesc.Digest.String(), bytes.NewReader(cfgBytes), cfgDesc); err != nil {
		return "", 0, fmt.Errorf("writing the snapshot's config to the node's content store: %w", err)
	}
	if err := content.WriteBlob(ctx, cs, "bottlefile-manifest-"+mDesc.Digest.String(), bytes.NewReader(mBytes), mDesc); err != nil {
		return "", 0, fmt.Errorf("writing the snapshot's manifest to the node's content store: %w", err)
	}

	img := &rawImage{mediaType: mDesc.MediaType, manifest: mBytes, config: cfgBytes, blobs: map[digest.Digest]blob{}}
	for _, l := range m.Layers {
		img.blobs[l.Digest] = storeBlob(ctx, cs, l)
	}
	if err := push(ctx, ref.Registry, ref.Repo, ref.Tag, img); err != nil {
		return "", 0, err
	}
	return mDesc.Digest.String(), layer.Size, nil
}

// base is a container's image as read from the node's content store.
type base struct {
	manifest ocispec.Manifest
	config   ocispec.Image
}

// baseImage finds the image the container was made from: the one it
// names, else (a name the CRI has since moved) the one whose layers are
// the snapshot's parent. Either way the image's layers must be the
// snapshot's parent, or the diff would not stack on them.
func baseImage(ctx context.Context, c *containerd.Client, ctr containers.Container, parent string) (base, error) {
	try := func(img images.Image) (base, bool, error) {
		var b base
		m, err := images.Manifest(ctx, c.ContentStore(), img.Target, platforms.Default())
		if err != nil {
			return b, false, fmt.Errorf("reading the manifest of image %s: %w", img.Name, err)
		}
		raw, err := content.ReadBlob(ctx, c.ContentStore(), m.Config)
		if err != nil {
			return b, false, fmt.Errorf("reading the config of image %s: %w", img.Name, err)
		}
		if err := json.Unmarshal(raw, &b.config); err != nil {
			return b, false, fmt.Errorf("reading the config of image %s: %w", img.Name, err)
		}
		b.manifest = m
		return b, identity.ChainID(b.config.RootFS.DiffIDs).String() == parent, nil
	}
	is := c.ImageService()
	if ctr.Image != "" {
		img, err := is.Get(ctx, ctr.Image)
		if err == nil {
			b, ok, err := try(img)
			if err != nil {
				return b, err
			}
			if ok {
				return b, nil
			}
		} else if !errdefs.IsNotFound(err) {
			return base{}, fmt.Errorf("reading image %s: %w", ctr.Image, err)
		}
	}
	all, err := is.List(ctx)
	if err != nil {
		return base{}, fmt.Errorf("listing the node's images: %w", err)
	}
	for _, img := range all {
		if b, ok, err := try(img); err == nil && ok {
			return b, nil
		}
	}
	return base{}, fmt.Errorf("no image on the node has the layers container %s runs on (image %q, layers %s): was it removed?", ctr.ID, ctr.Image, parent)
}

// diffMediaType is the media type containerd's differ makes the new
// layer as: OCI's, gzip or not (containerd 1.6's differ makes no other).
func diffMediaType(uncompressed bool) string {
	if uncompressed {
		return ocispec.MediaTypeImageLayer
	}
	return ocispec.MediaTypeImageLayerGzip
}

// layerMediaType is the media type of the new layer in a manifest of type
// mt: Docker's for Docker's manifests, OCI's otherwise (the bytes are the
// same).
func layerMediaType(mt string, uncompressed bool) string {
	if mt == images.MediaTypeDockerSchema2Manifest {
		if uncompressed {
			return images.MediaTypeDockerSchema2Layer
		}
		return images.MediaTypeDockerSchema2LayerGzip
	}
	return diffMediaType(uncompressed)
}

func manifestMediaType(mt string) string {
	if mt == "" {
		return ocispec.MediaTypeImageManifest
	}
	return mt
}

// uncompressedDigest is the diff_id of a layer the differ wrote: the
// label the differ put on it, or the digest of its decompressed bytes.
func uncompressedDigest(ctx context.Context, cs content.Store, layer ocispec.Descriptor) (digest.Digest, error) {
	if info, err := cs.Info(ctx, layer.Digest); err == nil {
		if d, err := digest.Parse(info.Labels["containerd.io/uncompressed"]); err == nil {
			return d, nil
		}
	}
	ra, err := cs.ReaderAt(ctx, layer)
	if err != nil {
		return "", fmt.Errorf("reading the new layer: %w", err)
	}
	defer ra.Close()
	dr, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		return "", fmt.Errorf("reading the new layer: %w", err)
	}
	defer dr.Close()
	dg := digest.Canonical.Digester()
	if _, err := io.Copy(dg.Hash(), dr); err != nil {
		return "", fmt.Errorf("reading the new layer: %w", err)
	}
	return dg.Digest(), nil
}

// snapshotConfig is the base image's config with the new layer's diff_id,
// a history entry for it and the snapshot's labels. Labels of
// bottlefile's the base carried (a snapshot of a snapshot) are replaced.
func snapshotConfig(cfg ocispec.Image, diffID digest.Digest, labels map[string]string, addr string) ([]byte, error) {
	now := time.Now().UTC()
	// A history with fewer non-empty entries than layers (images made
	// without one) gets an entry per layer, so that ours lines up with
	// its layer.
	nonEmpty := 0
	for _, h := range cfg.History {
		if !h.EmptyLayer {
			nonEmpty++
		}
	}
	for ; nonEmpty < len(cfg.RootFS.DiffIDs); nonEmpty++ {
		cfg.History = append(cfg.History, ocispec.History{CreatedBy: "(base layer)"})
	}
	cfg.History = append(cfg.History, ocispec.History{Created: &now, CreatedBy: "bottlefile snapshot " + addr, Comment: "the container's changed files"})
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = append(append([]digest.Digest(nil), cfg.RootFS.DiffIDs...), diffID)
	cfg.Created = &now
	out := map[string]string{}
	for k, v := range cfg.Config.Labels {
		if !strings.HasPrefix(k, drivers.LabelPrefix) {
			out[k] = v
		}
	}
	for k, v := range labels {
		out[k] = v
	}
	cfg.Config.Labels = out
	return json.Marshal(cfg)
}

// storeBlob reads a blob from the node's content store.
func storeBlob(ctx context.Context, cs content.Store, desc ocispec.Descriptor) blob {
	return blob{
		mediaType: desc.MediaType,
		digest:    desc.Digest,
		size:      desc.Size,
		open: func() (io.ReadCloser, error) {
			ra, err := cs.ReaderAt(ctx, desc)
			if err != nil {
				if errdefs.IsNotFound(err) {
					return nil, fmt.Errorf("layer %s is not in the node's content store (does the node discard unpacked layers?): %w", desc.Digest, err)
				}
				return nil, err
			}
			return readCloser{Reader: content.NewReader(ra), Closer: ra}, nil
		},
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}
