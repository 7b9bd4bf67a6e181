package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/dockersave"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// ExportSnapshot writes one snapshot image as a docker-save tar stream
// (docker save), straight from the engine to w.
func (d *Driver) ExportSnapshot(ctx context.Context, ref string, w io.Writer) error {
	api, _, err := d.snapshotEngine(ctx)
	if err != nil {
		return err
	}
	if _, err := api.ImageInspect(ctx, ref); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("exporting snapshot image %s: it is not on the engine of runtime %q (removed outside bottlefile?)", ref, d.runtimeName())
		}
		return fmt.Errorf("exporting snapshot image %s: %w", ref, err)
	}
	rc, err := api.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("exporting snapshot image %s: %w", ref, err)
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		return fmt.Errorf("exporting snapshot image %s (after %d bytes): %w", ref, n, err)
	}
	d.log.Info("exported snapshot image", "ref", ref, "bytes", n)
	return nil
}

// ImportSnapshot loads a docker-save tar stream (docker load) as the
// snapshot req.Object of this runtime, tagged with the reference this
// lineage gives that address. The tar's own tags are never applied: the
// stream's manifest is rewritten on the way in, so a load can never move a
// tag another image of the engine holds.
//
// An image keeps its labels, so one saved from this lineage at this
// address (a migration) is used as it is; any other (snapshot import from
// another state) is loaded again with a config written here (snapshot.go):
// its config with this lineage's labels, its layers, a history naming no
// command and no container config, and no parent; the image as imported
// is removed.
//
// The response is as for a snapshot create, with Snapshot.Created the time
// of the import (so the next re-create resumes from it) and Snapshot.Taken
// the time the image itself was made.
func (d *Driver) ImportSnapshot(ctx context.Context, req drivers.ImportRequest, r io.Reader) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: %s", addr, fmt.Sprintf(format, args...))
	}
	if req.Lineage == "" {
		return fail("no state lineage")
	}
	api, _, err := d.snapshotEngine(ctx)
	if err != nil {
		return fail("%v", err)
	}
	imageMaking.RLock() // the loaded image is untagged between the two loads
	defer imageMaking.RUnlock()
	areq := drivers.ApplyRequest{Lineage: req.Lineage, Object: req.Object, Hash: req.Hash, Runtime: d.runtimeName()}
	agentAddr, err := snapshotAgent(areq)
	if err != nil {
		return fail("%v", err)
	}
	ref, err := engine.SnapshotRef(req.Lineage, addr, agentAddr)
	if err != nil {
		return fail("%v", err)
	}

	// The tar is rewritten on its way to the engine through a pipe: no copy
	// of it lands on disk here.
	pr, pw := io.Pipe()
	var info saveInfo
	done := make(chan error, 1)
	go func() {
		var err error
		info, err = retagSave(r, pw, ref)
		pw.CloseWithError(err)
		done <- err
	}()
	start := time.Now()
	resp, err := api.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err == nil {
		_, err = readStream(resp.Body)
		resp.Body.Close()
	}
	pr.CloseWithError(errors.New("the engine stopped reading the image"))
	rerr := <-done
	var werr *writeError
	switch {
	case rerr != nil && !errors.As(rerr, &werr):
		return fail("%v", rerr) // the stream itself is bad
	case err != nil:
		return fail("loading the image into the engine of runtime %q: %v", d.runtimeName(), err)
	case rerr != nil:
		// The engine had what it needed and stopped reading before the
		// tar's end-of-archive blocks; read the rest so that whatever
		// writes into r (an export) finishes cleanly.
		_, _ = io.Copy(io.Discard, r)
	}

	img, err := api.ImageInspect(ctx, ref)
	if err != nil {
		return fail("the engine loaded the image (%s) but %s is not there: %v", info.configDigest, ref, err)
	}
	taken := img.Created
	var labels map[string]string
	if img.Config != nil {
		labels = img.Config.Labels
	}
	want := areq.Labels()
	want[labelSnapshotOf] = agentAddr
	if src := labels[labelSnapshotSource]; src != "" {
		want[labelSnapshotSource] = src
	}
	relabel := false
	for k, v := range want {
		if labels[k] != v {
			relabel = true
		}
	}
	if relabel {
		cfg, err := snapshotImageConfig(&img, img, want, "layer of the imported snapshot", "", time.Now())
		if err != nil {
			return fail("%v", err)
		}
		if _, err := loadImageConfig(ctx, api, cfg, ref, len(img.RootFS.Layers)); err != nil {
			return fail("giving %s this state's labels: %v", ref, err)
		}
		// The image as imported goes unless it is the same image as one
		// still tagged (a snapshot of this engine exported and imported).
		if left, err := api.ImageInspect(ctx, img.ID); err == nil && !hasTags(left.RepoTags) {
			d.removeUntagged(ctx, api, img.ID)
		}
	}
	// An import's base is not known here: its size is its whole image.
	out, err := d.snapshotResponse(ctx, api, ref, labels[labelSnapshotSource], 0)
	if err != nil {
		return fail("%v", err)
	}
	out.Snapshot.Created = time.Now().UTC()
	out.Snapshot.Taken, _ = time.Parse(time.RFC3339Nano, taken)
	d.log.Info("imported snapshot", "addr", addr, "ref", ref, "id", shortID(out.ID), "relabelled", relabel, "elapsed", time.Since(start))
	return out, nil
}

func (d *Driver) runtimeName() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.runtime
}

// maxMetaSize bounds the JSON files of a docker-save tar read into memory.
const maxMetaSize = 16 << 20

// writeError is a failure to write the rewritten stream: the reader on
// the other side (the engine) went away.
type writeError struct{ err error }

func (e *writeError) Error() string { return "writing the image to the engine: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// saveInfo is what retagSave learned of the stream.
type saveInfo struct {
	configDigest string // the image id: sha256 of the config
}

// retagSave copies a docker-save tar stream from r to w, rewriting its
// manifest.json so that the one image it holds is tagged ref and nothing
// else, and dropping the legacy "repositories" file (which the engine
// consults only without a manifest, and which names the original tags).
// Layers stream through; nothing but the small JSON files is held in
// memory.
func retagSave(r io.Reader, w io.Writer, ref string) (saveInfo, error) {
	var info saveInfo
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	sawManifest := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return info, fmt.Errorf("reading the image tar: %w (is it a docker save tar?)", err)
		}
		switch {
		case dockersave.Name(hdr) == "repositories" && hdr.Typeflag == tar.TypeReg:
			continue
		case dockersave.IsManifest(hdr) && hdr.Typeflag == tar.TypeReg:
			if hdr.Size > maxMetaSize {
				return info, fmt.Errorf("the image tar's manifest.json is %d bytes; that is no docker save manifest", hdr.Size)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return info, fmt.Errorf("reading the image tar's manifest.json: %w", err)
			}
			out, digest, err := retagManifest(data, ref)
			if err != nil {
				return info, err
			}
			info.configDigest = digest
			sawManifest = true
			h := *hdr
			h.Size = int64(len(out))
			if err := tw.WriteHeader(&h); err != nil {
				return info, &writeError{err}
			}
			if _, err := tw.Write(out); err != nil {
				return info, &writeError{err}
			}
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return info, &writeError{err}
		}
		if _, err := io.Copy(writerOnly{tw}, tr); err != nil {
			var werr *writeError
			if errors.As(err, &werr) {
				return info, err
			}
			return info, fmt.Errorf("reading %s of the image tar: %w", hdr.Name, err)
		}
	}
	if !sawManifest {
		return info, errors.New("the image tar has no manifest.json: it is not a tar made by docker save (or bottlefile snapshot export)")
	}
	// Whatever follows the end-of-archive blocks is read too, so that the
	// writer of r is never left blocked.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return info, fmt.Errorf("reading the image tar: %w", err)
	}
	if err := tw.Close(); err != nil {
		return info, &writeError{err}
	}
	return info, nil
}

// writerOnly marks errors of the writer side of an io.Copy as writeErrors,
// so that they are told from errors reading the tar.
type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		return n, &writeError{err}
	}
	return n, nil
}

// retagManifest rewrites a docker-save manifest.json that holds one image
// so that its only tag is ref, and returns the image's config digest.
func retagManifest(data []byte, ref string) ([]byte, string, error) {
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, "", fmt.Errorf("the image tar's manifest.json is not a docker save manifest: %w", err)
	}
	if len(entries) != 1 {
		return nil, "", fmt.Errorf("the image tar holds %d images; a snapshot tar holds exactly one", len(entries))
	}
	var cfg string
	if err := json.Unmarshal(entries[0]["Config"], &cfg); err != nil || cfg == "" {
		return nil, "", errors.New("the image tar's manifest.json names no image config")
	}
	tags, _ := json.Marshal([]string{ref})
	entries[0]["RepoTags"] = tags
	out, err := json.Marshal(entries)
	if err != nil {
		return nil, "", err
	}
	digest := strings.TrimSuffix(path.Base(cfg), ".json")
	return out, "sha256:" + digest, nil
}
