// Package dockersave reads the tar archives "docker save" writes (and
// snapshot export, and smolvm's --image takes): a manifest.json at the top
// that names each image's config file. It is a leaf, so the drivers and
// the operations layer share one reader.
package dockersave

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// ManifestName is the name of the manifest at the top of the archive.
const ManifestName = "manifest.json"

// maxJSONSize bounds the manifest and config files read into memory.
const maxJSONSize = 16 << 20

// ErrNoManifest says the archive has no manifest.json.
var ErrNoManifest = errors.New("it has no manifest.json: it is not a docker-save tar (snapshot export writes those)")

// Name is an entry's name as the engine reads it: "./" and redundant
// parts removed.
func Name(hdr *tar.Header) string {
	return path.Clean(strings.TrimPrefix(hdr.Name, "./"))
}

// IsManifest reports whether the entry is the archive's manifest.
func IsManifest(hdr *tar.Header) bool { return Name(hdr) == ManifestName }

// CheckManifest reads only the headers of r and reports ErrNoManifest (or
// the tar error) unless the archive has a manifest.json.
func CheckManifest(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return ErrNoManifest
		}
		if err != nil {
			return err
		}
		if IsManifest(hdr) {
			return nil
		}
	}
}

// Labels reads the labels of the one image a docker-save archive holds:
// the manifest names its config file, which is read in a second pass.
func Labels(f io.ReadSeeker) (map[string]string, error) {
	tr := tar.NewReader(f)
	var configPath string
	for configPath == "" {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, ErrNoManifest
		}
		if err != nil {
			return nil, fmt.Errorf("reading it as a tar: %w (snapshot export writes docker-save tars)", err)
		}
		if !IsManifest(hdr) {
			continue
		}
		var manifest []struct{ Config string }
		if err := json.NewDecoder(io.LimitReader(tr, maxJSONSize)).Decode(&manifest); err != nil {
			return nil, fmt.Errorf("its manifest.json: %w", err)
		}
		if len(manifest) != 1 {
			return nil, fmt.Errorf("it holds %d images; a snapshot tar holds one", len(manifest))
		}
		configPath = path.Clean(manifest[0].Config)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	tr = tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if Name(hdr) != configPath {
			continue
		}
		var cfg struct {
			Config struct{ Labels map[string]string }
		}
		if err := json.NewDecoder(io.LimitReader(tr, maxJSONSize)).Decode(&cfg); err != nil {
			return nil, fmt.Errorf("its image config: %w", err)
		}
		return cfg.Config.Labels, nil
	}
}
