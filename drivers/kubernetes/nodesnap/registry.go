package nodesnap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Registry is a registry's address.
//
// The registry is spoken to over HTTPS, except when PlainHTTP is set (a
// registry the runtime names as plain HTTP) and for the addresses
// go-containerregistry reaches over plain HTTP anyway: loopback,
// localhost, *.local and the private ranges (10/8, 172.16/12, 192.168/16).
// No credentials are sent: a registry that asks for them is not supported
// yet.
type Registry struct {
	// Host is HOST[:PORT], no scheme and no path.
	Host      string
	PlainHTTP bool
}

func (r Registry) check() error {
	if r.Host == "" {
		return errors.New("no registry given")
	}
	if strings.ContainsAny(r.Host, "/ ") {
		return fmt.Errorf("registry %q is not HOST[:PORT] (no scheme, no path: the path belongs to the repository)", r.Host)
	}
	if _, err := r.name(); err != nil {
		return fmt.Errorf("registry %q: %w", r.Host, err)
	}
	return nil
}

func (r Registry) name() (name.Registry, error) {
	var opts []name.Option
	if r.PlainHTTP {
		opts = append(opts, name.Insecure)
	}
	return name.NewRegistry(r.Host, opts...)
}

// repoPattern is the registry's repository grammar (distribution's
// path components, lower case, joined by "/").
var repoPattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)

var validTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func checkRepo(repo string) error {
	if !repoPattern.MatchString(repo) || len(repo) > 255 {
		return fmt.Errorf("%q is not a registry repository (lower-case letters, digits and . _ - between them, parts joined by /)", repo)
	}
	return nil
}

func (r Registry) repo(repo string) (name.Repository, error) {
	if err := r.check(); err != nil {
		return name.Repository{}, err
	}
	if err := checkRepo(repo); err != nil {
		return name.Repository{}, err
	}
	reg, err := r.name()
	if err != nil {
		return name.Repository{}, err
	}
	return reg.Repo(repo), nil
}

// requestTimeout bounds each registry call that moves no layer (a push
// is bounded by its context only).
const requestTimeout = 30 * time.Second

func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(&http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: requestTimeout})}
}

// blob is a layer as pushed: its bytes and descriptor.
type blob struct {
	mediaType string
	digest    digest.Digest
	size      int64
	open      func() (io.ReadCloser, error)
}

func (b blob) Digest() (v1.Hash, error)            { return v1.NewHash(b.digest.String()) }
func (b blob) Compressed() (io.ReadCloser, error)  { return b.open() }
func (b blob) Size() (int64, error)                { return b.size, nil }
func (b blob) MediaType() (types.MediaType, error) { return types.MediaType(b.mediaType), nil }

// rawImage is an image as its manifest's and config's bytes and its
// layers' blobs: what go-containerregistry pushes.
type rawImage struct {
	mediaType string
	manifest  []byte
	config    []byte
	blobs     map[digest.Digest]blob
}

func (i *rawImage) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *rawImage) MediaType() (types.MediaType, error) { return types.MediaType(i.mediaType), nil }
func (i *rawImage) RawManifest() ([]byte, error)        { return i.manifest, nil }
func (i *rawImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	b, ok := i.blobs[digest.Digest(h.String())]
	if !ok {
		return nil, fmt.Errorf("the manifest names no layer %s", h)
	}
	return b, nil
}

// push sends img to the registry by its manifest's digest, then tags it
// when tag is set.
func push(ctx context.Context, reg Registry, repo, tag string, raw *rawImage) error {
	r, err := reg.repo(repo)
	if err != nil {
		return err
	}
	img, err := partial.CompressedToImage(raw)
	if err != nil {
		return err
	}
	d := r.Digest(digest.FromBytes(raw.manifest).String())
	if err := remote.Write(d, img, remoteOptions(ctx)...); err != nil {
		return fmt.Errorf("pushing %s: %w", d, err)
	}
	if tag != "" {
		if !validTag.MatchString(tag) {
			return fmt.Errorf("tag %q is not a registry tag", tag)
		}
		t := r.Tag(tag)
		if err := remote.Tag(t, img, remoteOptions(ctx)...); err != nil {
			return fmt.Errorf("tagging %s as %s: %w", d, t, err)
		}
	}
	return nil
}

// Layer is one uncompressed tar layer of an image to push.
type Layer struct {
	// DiffID is the digest of the tar, Size its length in bytes.
	DiffID digest.Digest
	Size   int64
	// Open returns the tar's bytes; it may be called more than once (a
	// retried upload).
	Open func() (io.ReadCloser, error)
}

// PushImage pushes an image of layers (bottom first) and the run settings
// cfg to repo in the registry, by digest, tagged too when tag is set, and
// returns the manifest's digest. The layers go uncompressed (OCI
// media type ...layer.v1.tar), so a layer's digest is its DiffID: meant
// for small images bottlefile builds itself, as the gateway's.
func PushImage(ctx context.Context, reg Registry, repo, tag string, layers []Layer, cfg ocispec.ImageConfig) (string, error) {
	if len(layers) == 0 {
		return "", errors.New("an image needs at least one layer")
	}
	raw := &rawImage{mediaType: ocispec.MediaTypeImageManifest, blobs: map[digest.Digest]blob{}}
	img := ocispec.Image{Config: cfg, RootFS: ocispec.RootFS{Type: "layers"}}
	img.Platform = ocispec.Platform{OS: "linux", Architecture: goarch()}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest}
	m.SchemaVersion = 2
	for i, l := range layers {
		if err := l.DiffID.Validate(); err != nil {
			return "", fmt.Errorf("layer %d: diff id %q: %w", i, l.DiffID, err)
		}
		if l.Open == nil || l.Size < 0 {
			return "", fmt.Errorf("layer %d has no contents", i)
		}
		img.RootFS.DiffIDs = append(img.RootFS.DiffIDs, l.DiffID)
		img.History = append(img.History, ocispec.History{CreatedBy: "bottlefile"})
		d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: l.DiffID, Size: l.Size}
		m.Layers = append(m.Layers, d)
		raw.blobs[l.DiffID] = blob{mediaType: d.MediaType, digest: d.Digest, size: d.Size, open: l.Open}
	}
	var err error
	if raw.config, err = json.Marshal(img); err != nil {
		return "", err
	}
	m.Config = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(raw.config), Size: int64(len(raw.config))}
	if raw.manifest, err = json.Marshal(m); err != nil {
		return "", err
	}
	if err := push(ctx, reg, repo, tag, raw); err != nil {
		return "", err
	}
	return digest.FromBytes(raw.manifest).String(), nil
}

// Delete removes the manifest dgst (and so every tag on it) from repo in
// the registry. A manifest already gone is no error. The registry must
// allow deletes: Docker's distribution registry (Debian's docker-registry)
// refuses them unless its config has
//
//	storage:
//	  delete:
//	    enabled: true
//
// and frees the layers only at its garbage collection
// (docker-registry garbage-collect CONFIG).
func Delete(ctx context.Context, reg Registry, repo, dgst string) error {
	r, err := reg.repo(repo)
	if err != nil {
		return err
	}
	if _, err := digest.Parse(dgst); err != nil {
		return fmt.Errorf("%q is not a manifest digest: %w", dgst, err)
	}
	ref := r.Digest(dgst)
	if err := remote.Delete(ref, remoteOptions(ctx)...); err != nil {
		if isStatus(err, http.StatusNotFound) {
			return nil
		}
		if isStatus(err, http.StatusMethodNotAllowed) {
			return fmt.Errorf("the registry %s refuses to delete %s: enable its deletes (storage.delete.enabled: true): %w", reg.Host, ref, err)
		}
		return fmt.Errorf("deleting %s: %w", ref, err)
	}
	return nil
}

// Tagged is a tag of a repository and the manifest it names.
type Tagged struct {
	Tag    string
	Digest string
}

// List returns repo's tags and their manifests' digests, by tag. A
// repository the registry does not know has none.
func List(ctx context.Context, reg Registry, repo string) ([]Tagged, error) {
	r, err := reg.repo(repo)
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(r, remoteOptions(ctx)...)
	if err != nil {
		if isStatus(err, http.StatusNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing the tags of %s: %w", r, err)
	}
	sort.Strings(tags)
	out := make([]Tagged, 0, len(tags))
	for _, t := range tags {
		d, err := remote.Head(r.Tag(t), remoteOptions(ctx)...)
		if err != nil {
			if isStatus(err, http.StatusNotFound) {
				continue // deleted since the list
			}
			return nil, fmt.Errorf("reading tag %s of %s: %w", t, r, err)
		}
		out = append(out, Tagged{Tag: t, Digest: d.Digest.String()})
	}
	return out, nil
}

func isStatus(err error, status int) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == status
}
