package smolvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/dockersave"
	"github.com/bottlefile/bottlefile/drivers"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// Snapshots are files under the state directory (.bottlefile), one
// directory per lineage:
//
//	snapshots/<lineage[:8]>/<address>-<n>              the pack's executable stub
//	snapshots/<lineage[:8]>/<address>-<n>.smolmachine  the pack a machine boots from
//	snapshots/<lineage[:8]>/<address>-<n>.tar          or: a docker-save tar (migration)
//	snapshots/<lineage[:8]>/<address>-<n>.json         what Read lists: lineage, address, hash
//
// A machine created from a snapshot boots from a hard link of it under
// boot/<lineage[:8]>/<machine>.smolmachine (or .tar): smolvm reads a
// machine's source pack at every start, so deleting or pruning the
// snapshot must not take the file from under a machine that still runs.
const (
	snapshotsDirName = "snapshots"
	bootDirName      = "boot"
	packExt          = ".smolmachine"
	tarExt           = ".tar"
	metaExt          = ".json"
	partialExt       = ".partial"
)

// Snapshot formats, as the metadata records them.
const (
	formatPack       = "smolmachine"
	formatDockerSave = "docker-save"
)

// snapshotMeta is the small JSON file beside each snapshot. It is written
// (Complete false) before the pack, so that a snapshot interrupted halfway
// is still found and removed, and rewritten once the pack is whole.
type snapshotMeta struct {
	Lineage    string `json:"lineage"`
	Address    string `json:"address"`
	ConfigHash string `json:"config_hash"`
	Runtime    string `json:"runtime"`
	Format     string `json:"format"`
	Image      string `json:"image"` // base name of the file a machine boots from
	Size       int64  `json:"size,omitempty"`
	Created    string `json:"created,omitempty"`
	Source     string `json:"source,omitempty"`
	Complete   bool   `json:"complete"`
}

// snapshotEntry is one snapshot found on disk.
type snapshotEntry struct {
	base string // absolute path without extension
	meta snapshotMeta
}

func (e snapshotEntry) image() string { return filepath.Join(filepath.Dir(e.base), e.meta.Image) }

// stateDirs returns the driver's snapshots and boot directories for a
// lineage, or an error when the driver was configured without a state
// directory.
func (d *Driver) stateDirs(lineage string) (snapshots, boot string, err error) {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	if stateDir == "" {
		return "", "", errors.New("the smolvm driver keeps snapshots under the state directory, and none was configured")
	}
	prefix := drivers.LineagePrefix(lineage)
	if prefix == "" {
		return "", "", errors.New("no lineage to file snapshots under")
	}
	return filepath.Join(stateDir, snapshotsDirName, prefix), filepath.Join(stateDir, bootDirName, prefix), nil
}

// ref is how a snapshot file is named in the state and the plan: relative
// to the Bottlefile's directory ("./.bottlefile/snapshots/..."), so that a
// checkout that moves keeps its snapshots. Paths outside it stay absolute.
func (d *Driver) ref(abs string) string {
	base := d.imageBase()
	if base == "" {
		return abs
	}
	rel, err := filepath.Rel(base, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return abs
	}
	return "./" + filepath.ToSlash(rel)
}

// resolveSnapshot turns a snapshot's id (a ref) into its absolute path,
// and refuses anything outside the snapshots directory: a delete never
// removes a file bottlefile did not make.
func (d *Driver) resolveSnapshot(id string) (string, error) {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	if stateDir == "" {
		return "", errors.New("the smolvm driver keeps snapshots under the state directory, and none was configured")
	}
	abs := filepath.Clean(localPath(filepath.FromSlash(id), d.imageBase()))
	root := filepath.Join(stateDir, snapshotsDirName)
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s is not a snapshot under %s", id, root)
	}
	return abs, nil
}

// snapshotBase strips the image extension from a snapshot file's path.
func snapshotBase(path string) (string, bool) {
	for _, ext := range []string{packExt, tarExt} {
		if b, ok := strings.CutSuffix(path, ext); ok && b != "" {
			return b, true
		}
	}
	return "", false
}

// listSnapshots reads the metadata of every snapshot this runtime keeps
// for a lineage: one directory listing. A lineage without snapshots, or a
// driver without a state directory, has none.
func (d *Driver) listSnapshots(lineage string) ([]snapshotEntry, error) {
	dir, _, err := d.stateDirs(lineage)
	if err != nil {
		return nil, nil
	}
	files, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	d.mu.RLock()
	runtime := d.runtime
	d.mu.RUnlock()
	var out []snapshotEntry
	for _, f := range files {
		name := f.Name()
		if f.IsDir() || !strings.HasSuffix(name, metaExt) {
			continue
		}
		base := filepath.Join(dir, strings.TrimSuffix(name, metaExt))
		m, err := readMeta(base)
		if err != nil {
			d.log.Warn("ignoring an unreadable snapshot record", "path", base+metaExt, "error", err)
			continue
		}
		if m.Lineage != lineage || m.Runtime != runtime {
			continue
		}
		out = append(out, snapshotEntry{base: base, meta: m})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base < out[j].base })
	return out, nil
}

// readSnapshots reports the snapshots of a lineage as live objects. An
// unfinished one (a crash while packing) has no hash, so the planner
// deletes or re-takes it rather than adopting it; one whose file was
// deleted outside bottlefile is not reported.
func (d *Driver) readSnapshots(lineage string) ([]drivers.LiveObject, error) {
	entries, err := d.listSnapshots(lineage)
	if err != nil {
		return nil, err
	}
	var out []drivers.LiveObject
	for _, e := range entries {
		o := drivers.LiveObject{
			Addr:    e.meta.Address,
			Kind:    drivers.KindSnapshot,
			ID:      d.ref(e.image()),
			Name:    e.meta.Image,
			Runtime: e.meta.Runtime,
		}
		if e.meta.Complete {
			if _, err := os.Stat(e.image()); err != nil {
				d.log.Info("snapshot file is gone; not reporting it", "addr", e.meta.Address, "path", e.image())
				continue
			}
			o.Hash = e.meta.ConfigHash
		}
		out = append(out, o)
	}
	// The core keeps one live object per address, the last one: where a
	// crash left an unfinished snapshot beside a whole one at the same
	// address, the whole one is reported; once it is gone, a later plan
	// sees the unfinished one and removes it.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Hash == "" && out[j].Hash != "" })
	return out, nil
}

func readMeta(base string) (snapshotMeta, error) {
	var m snapshotMeta
	b, err := os.ReadFile(base + metaExt)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, err
	}
	if m.Address == "" || m.Image == "" || strings.ContainsRune(m.Image, '/') || strings.ContainsRune(m.Image, filepath.Separator) {
		return m, errors.New("not a snapshot record")
	}
	return m, nil
}

// writeMeta replaces a snapshot's metadata atomically.
func writeMeta(base string, m snapshotMeta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(base+metaExt, append(b, '\n'), 0o600)
}

// reserve claims the next free <address>-<n> in dir by creating its
// metadata file exclusively, and returns the base path.
func reserve(dir string, m snapshotMeta, ext string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	next := 1
	prefix := m.Address + "-"
	for _, f := range files {
		rest, ok := strings.CutPrefix(f.Name(), prefix)
		if !ok {
			continue
		}
		digits := rest
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			digits = rest[:i]
		}
		if n, err := strconv.Atoi(digits); err == nil && n >= next {
			next = n + 1
		}
	}
	for ; ; next++ {
		base := filepath.Join(dir, m.Address+"-"+strconv.Itoa(next))
		f, err := os.OpenFile(base+metaExt, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		f.Close()
		m.Image = filepath.Base(base) + ext
		if err := writeMeta(base, m); err != nil {
			os.Remove(base + metaExt)
			return "", err
		}
		return base, nil
	}
}

// removeSnapshotFiles deletes everything a snapshot consists of, the
// metadata last, so that a delete interrupted halfway is retried.
func removeSnapshotFiles(base string) error {
	var errs []error
	for _, ext := range []string{packExt, tarExt, tarExt + partialExt, "", metaExt + partialExt, metaExt} {
		if err := os.Remove(base + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// createSnapshot packs the agent's machine: stop, "pack create --from-vm
// NAME -o PATH", start again. The pack carries the machine's disk and the
// command, env and workdir it was created with, except the sensitive env
// values: those are removed from the stopped machine before the pack
// ("machine update --remove-env") and put back after it, before the start
// ("machine update -e KEY", the value passed in smolvm's environment, as
// at create). A machine restored from a pack is given the agent's
// declared command, env and workdir on the command line, which override
// the pack's. An apply killed between the two updates leaves the machine
// without its sensitive env until it is created again.
func (d *Driver) createSnapshot(ctx context.Context, run runner, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	if req.Agent == nil {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: a snapshot needs the agent it is taken of", addr)
	}
	name, err := machineName(req.Lineage, req.NamedAddr(req.Agent.Addr))
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("%s: %w", addr, err)
	}
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("taking snapshot %s of %s (machine %s): %s", addr, req.Agent.Addr, name, fmt.Sprintf(format, args...))
	}
	dir, _, err := d.stateDirs(req.Lineage)
	if err != nil {
		return fail("%v", err)
	}
	entries, err := d.list(ctx, run)
	if err != nil {
		return fail("%v", err)
	}
	m := find(entries, name)
	switch {
	case m == nil:
		return fail("the machine does not exist")
	case m.Labels[drivers.LabelLineage] != req.Lineage:
		return fail("the machine does not belong to this state (lineage %s)", req.Lineage)
	}
	running := m.State == "running"
	var secrets []envVar
	vars, err := decodeEnv(drivers.WorkloadAttr(req.Agent.Workload, "env"))
	if err != nil {
		return fail("env: %v", err)
	}
	for _, e := range vars {
		if e.secret {
			secrets = append(secrets, e)
		}
	}

	d.mu.RLock()
	runtime := d.runtime
	d.mu.RUnlock()
	meta := snapshotMeta{Lineage: req.Lineage, Address: addr, ConfigHash: req.Hash, Runtime: runtime, Format: formatPack, Source: name}
	base, err := reserve(dir, meta, packExt)
	if err != nil {
		return fail("reserving a file for the pack: %v", err)
	}
	meta.Image = filepath.Base(base) + packExt

	// The machine must be stopped to be packed; it is started again
	// whatever happens, even when ctx is cancelled meanwhile.
	if running {
		if _, err := run.run(ctx, []string{"machine", "stop", "--name", name}, nil); err != nil {
			removeSnapshotFiles(base)
			return fail("stopping it: %v", err)
		}
	}
	// A pack holds the machine's env (its manifest's "env"): the sensitive
	// values are taken out of the machine for the pack and put back after.
	packErr := removeEnv(ctx, run, name, secrets)
	if packErr == nil {
		_, packErr = run.run(ctx, []string{"pack", "create", "--from-vm", name, "-o", base}, nil)
	}
	var startErr error
	if len(secrets) > 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		flags, env := envArgs(secrets, func(msg string, args ...any) { d.log.Warn(msg, args...) })
		if _, err := run.run(sctx, append([]string{"machine", "update", "--name", name}, flags...), env); err != nil {
			startErr = fmt.Errorf("putting its sensitive env back: %w", err)
		}
		cancel()
	}
	if running && startErr == nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+d.readyTimeout)
		if _, startErr = run.run(sctx, []string{"machine", "start", "--name", name}, nil); startErr == nil {
			startErr = d.waitReady(sctx, run, name)
		}
		cancel()
	}
	if packErr != nil {
		removeSnapshotFiles(base)
		if startErr != nil {
			return fail("%v; and the machine did not start again: %v", packErr, startErr)
		}
		return fail("%v", packErr)
	}
	info, err := os.Stat(base + packExt)
	if err != nil {
		removeSnapshotFiles(base)
		return fail("smolvm pack create wrote no %s: %v", base+packExt, err)
	}
	meta.Size = info.Size()
	meta.Created = time.Now().UTC().Format(time.RFC3339Nano)
	meta.Complete = true
	if err := writeMeta(base, meta); err != nil {
		removeSnapshotFiles(base)
		return fail("recording the snapshot: %v", err)
	}
	resp := d.snapshotResponse(base, meta)
	if startErr != nil {
		// The snapshot is whole and listed; the next plan adopts it and
		// starts the machine.
		return drivers.ApplyResponse{}, fmt.Errorf("snapshot %s of %s was taken (%s), but machine %s did not start again: %w", addr, req.Agent.Addr, resp.ID, name, startErr)
	}
	d.log.Info("took snapshot", "addr", addr, "machine", name, "pack", resp.ID, "size", meta.Size)
	return resp, nil
}

// removeEnv takes env keys out of a stopped machine ("machine update
// --remove-env").
func removeEnv(ctx context.Context, run runner, name string, vars []envVar) error {
	if len(vars) == 0 {
		return nil
	}
	args := []string{"machine", "update", "--name", name}
	for _, e := range vars {
		args = append(args, "--remove-env", e.key)
	}
	if _, err := run.run(ctx, args, nil); err != nil {
		return fmt.Errorf("taking its sensitive env out for the pack: %w", err)
	}
	return nil
}

func (d *Driver) snapshotResponse(base string, m snapshotMeta) drivers.ApplyResponse {
	id := d.ref(filepath.Join(filepath.Dir(base), m.Image))
	created, _ := time.Parse(time.RFC3339Nano, m.Created)
	return drivers.ApplyResponse{ID: id, Snapshot: &drivers.SnapshotResult{Image: id, Size: m.Size, Created: created, Source: m.Source}}
}

// deleteSnapshot removes a snapshot's files. Without a recorded id it
// removes every snapshot this lineage keeps at the address.
func (d *Driver) deleteSnapshot(req drivers.ApplyRequest) error {
	addr := req.Object.Addr
	if req.ID != "" {
		path, err := d.resolveSnapshot(req.ID)
		if err != nil {
			return fmt.Errorf("deleting snapshot %s: %w", addr, err)
		}
		base, ok := snapshotBase(path)
		if !ok {
			return fmt.Errorf("deleting snapshot %s: %s is neither a .smolmachine nor a .tar", addr, req.ID)
		}
		if err := removeSnapshotFiles(base); err != nil {
			return fmt.Errorf("deleting snapshot %s: %w", addr, err)
		}
		d.log.Info("deleted snapshot", "addr", addr, "path", req.ID)
		return nil
	}
	entries, err := d.listSnapshots(req.Lineage)
	if err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", addr, err)
	}
	for _, e := range entries {
		if e.meta.Address != addr {
			continue
		}
		if err := removeSnapshotFiles(e.base); err != nil {
			return fmt.Errorf("deleting snapshot %s: %w", addr, err)
		}
		d.log.Info("deleted snapshot", "addr", addr, "path", d.ref(e.image()))
	}
	return nil
}

var _ drivers.SnapshotImporter = (*Driver)(nil)

// ImportSnapshot takes in a docker-save tar stream (a snapshot migrating
// from docker) as a snapshot of this runtime: the stream is written to
// one file under the state directory, the file smolvm boots from with
// "machine create --image PATH.tar". Nothing else is copied.
//
// The smolvm driver does not implement drivers.SnapshotExporter: smolvm
// has no way to turn a machine or a .smolmachine into a docker-save tar
// (reference/smolvm-cli.md, sections 4 and 7), so snapshots leave smolvm
// only as packs.
func (d *Driver) ImportSnapshot(ctx context.Context, req drivers.ImportRequest, r io.Reader) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s into smolvm: %s", addr, fmt.Sprintf(format, args...))
	}
	if _, err := d.cli(); err != nil {
		return fail("%v", err)
	}
	if req.Lineage == "" {
		return fail("no state lineage")
	}
	if req.Object.Kind != drivers.KindSnapshot {
		return fail("it is a %s, not a snapshot", req.Object.Kind)
	}
	dir, _, err := d.stateDirs(req.Lineage)
	if err != nil {
		return fail("%v", err)
	}
	d.mu.RLock()
	runtime := d.runtime
	d.mu.RUnlock()
	meta := snapshotMeta{Lineage: req.Lineage, Address: addr, ConfigHash: req.Hash, Runtime: runtime, Format: formatDockerSave}
	base, err := reserve(dir, meta, tarExt)
	if err != nil {
		return fail("reserving a file for the image: %v", err)
	}
	meta.Image = filepath.Base(base) + tarExt
	size, err := writeStream(ctx, base+tarExt+partialExt, r)
	if err == nil {
		err = checkDockerSave(base + tarExt + partialExt)
	}
	if err == nil {
		err = os.Rename(base+tarExt+partialExt, base+tarExt)
	}
	if err != nil {
		removeSnapshotFiles(base)
		return fail("%v", err)
	}
	meta.Size = size
	meta.Created = time.Now().UTC().Format(time.RFC3339Nano)
	meta.Complete = true
	if err := writeMeta(base, meta); err != nil {
		removeSnapshotFiles(base)
		return fail("recording it: %v", err)
	}
	resp := d.snapshotResponse(base, meta)
	d.log.Info("imported snapshot", "addr", addr, "tar", resp.ID, "size", size)
	return resp, nil
}

// writeStream copies r into a new file at path, stopping when ctx is done.
func writeStream(ctx context.Context, path string, r io.Reader) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return n, nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// checkDockerSave checks that a file is a docker-save archive, which is
// what smolvm's --image takes as a local tar: a tar with a manifest.json
// at its top. Only the headers are read.
func checkDockerSave(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	switch err := dockersave.CheckManifest(f); {
	case errors.Is(err, dockersave.ErrNoManifest):
		return errors.New("the stream is not a docker-save archive: it has no manifest.json")
	case err != nil:
		return fmt.Errorf("the stream is not a docker-save archive: %w", err)
	}
	return nil
}

// bootPath is the file a machine created from a snapshot file boots
// from: a hard link of its own under boot/ (made by linkBoot), so that
// smolvm finds the file at every start however long the snapshot itself
// is kept. Files outside the snapshots directory are used as they are.
func (d *Driver) bootPath(lineage, name, src string) (string, error) {
	if _, err := d.resolveSnapshot(src); err != nil {
		return src, nil // not one of ours
	}
	_, bootDir, err := d.stateDirs(lineage)
	if err != nil {
		return "", err
	}
	return filepath.Join(bootDir, name+filepath.Ext(src)), nil
}

// linkBoot makes link a hard link of src (a copy where links are not
// possible), replacing what a crashed run left there.
func (d *Driver) linkBoot(src, link string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("the snapshot file %s: %w", d.ref(src), err)
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		return err
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	err := os.Link(src, link)
	if err == nil {
		return nil
	}
	d.log.Debug("cannot hard-link the snapshot; copying it", "from", src, "error", err)
	return copyFile(src, link)
}

// removeBootFiles removes the files a machine booted from, once the
// machine is gone.
func (d *Driver) removeBootFiles(lineage, name string) {
	_, bootDir, err := d.stateDirs(lineage)
	if err != nil {
		return
	}
	for _, ext := range []string{packExt, tarExt} {
		if err := os.Remove(filepath.Join(bootDir, name+ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("could not remove the file a deleted machine booted from", "path", filepath.Join(bootDir, name+ext), "error", err)
		}
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(to)
	}
	return err
}
