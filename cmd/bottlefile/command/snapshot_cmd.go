package command

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/cli"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// SnapshotCommand is the parent of the snapshot subcommands.
type SnapshotCommand struct{ Meta *Meta }

func (c *SnapshotCommand) Synopsis() string { return "List, take, remove and move snapshots" }

func (c *SnapshotCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot <subcommand> [args]

  list [-json] [ADDR]   List the recorded snapshots: what took each, its
                        size and age, and what was created from it.
  take ADDR             Snapshot agent ADDR now and record it (for hooks:
                        it does not ask).
  rm ADDR...            Remove recorded snapshots (asks first).
  export ADDR -o FILE   Write a recorded snapshot as a docker-save tar.
  import FILE           Load a snapshot tar into an agent's runtime and
                        record it as the agent's newest snapshot, so the
                        agent resumes from it when it is next created.

  Snapshot blocks and snapshot_policy take snapshots as part of a plan;
  take adds one on demand. export and import move one to a machine that
  shares no engine with this one:

    bottlefile snapshot export agent.coder.snapshot.3 -o coder.tar
    # on the other machine, in the directory of its Bottlefile:
    bottlefile snapshot import coder.tar
    bottlefile apply
`)
}

func (c *SnapshotCommand) Run(args []string) int { return cli.RunResultHelp }

// SnapshotExportCommand writes a snapshot as a docker-save tar.
type SnapshotExportCommand struct{ Meta *Meta }

func (c *SnapshotExportCommand) Synopsis() string {
	return "Write a recorded snapshot as a docker-save tar"
}

func (c *SnapshotExportCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot export [options] ADDR -o FILE

  Writes the snapshot the state records at ADDR (agent.NAME.snapshot.N or
  snapshot.NAME) as a docker-save tar, streamed from its runtime. FILE is
  written in full or not at all; "-o -" writes to standard output.

Options:

  -o FILE              Where to write the tar (required).
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *SnapshotExportCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("snapshot export")
	out := fs.String("o", "", "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(pos) != 1 {
		return m.fail("Invalid command line", errors.New("snapshot export needs one snapshot address, like agent.coder.snapshot.1 (`bottlefile state list` lists them)"))
	}
	if *out == "" {
		return m.fail("Invalid command line", errors.New("snapshot export needs -o FILE (or -o - for standard output)"))
	}
	addr := pos[0]

	ctx := m.Ctx
	op, diags := m.openOperation(ctx, true, *lockTimeout, *in)
	defer op.close()
	if m.showDiags(op.files(), diags) {
		return 1
	}
	rec, ok, err := op.store.Get(addr)
	if err != nil {
		return m.fail("Cannot read state", err)
	}
	if !ok {
		return m.fail("No such snapshot", fmt.Errorf("the state records no object at %s; `bottlefile state list` lists what it records", addr))
	}
	if rec.Kind != drivers.KindSnapshot {
		return m.fail("Not a snapshot", fmt.Errorf("%s is a %s, not a snapshot", addr, rec.Kind))
	}
	image := rec.Computed["image"]
	if image == "" {
		return m.fail("Snapshot has no image", fmt.Errorf("the state records no image for %s; plan and apply to take it again", addr))
	}
	rt, ok := op.runtimes[rec.Runtime]
	if !ok {
		return m.fail("Runtime not available", fmt.Errorf("%s is on runtime %q, which the Bottlefile does not declare (or which could not be configured)", addr, rec.Runtime))
	}
	exporter, ok := rt.Driver.(drivers.SnapshotExporter)
	if !ok {
		return m.fail("Cannot export", fmt.Errorf("the %s driver of runtime %q cannot export snapshots", rt.Driver.Name(), rec.Runtime))
	}

	info := m.Stdout
	var n int64
	if *out == "-" {
		info = m.Stderr
		cw := &countingWriter{w: m.Stdout}
		if err := exporter.ExportSnapshot(ctx, image, cw); err != nil {
			return m.fail("Export failed", err)
		}
		n = cw.n
	} else {
		n, err = writeAtomically(*out, func(w io.Writer) error { return exporter.ExportSnapshot(ctx, image, w) })
		if err != nil {
			return m.fail("Export failed", err)
		}
	}
	where := *out
	if where == "-" {
		where = "standard output"
	}
	fmt.Fprintf(info, "Exported %s (%s, from runtime %q) to %s: %s.\n", addr, image, rec.Runtime, where, sizeWords(n))
	return 0
}

// SnapshotImportCommand loads a snapshot tar and records it.
type SnapshotImportCommand struct{ Meta *Meta }

func (c *SnapshotImportCommand) Synopsis() string {
	return "Load a snapshot tar as an agent's newest snapshot"
}

func (c *SnapshotImportCommand) Help() string {
	return strings.TrimSpace(`
Usage: bottlefile [global options] snapshot import [options] FILE

  Loads a docker-save tar (from snapshot export) into the runtime of an
  agent of this Bottlefile and records it as that agent's next policy
  snapshot, agent.NAME.snapshot.N. The next time the agent is created it
  resumes from it (unless resume = false): after a destroy, on a machine
  where it never ran, or after a migration. "-" reads the tar from standard
  input (then -agent is required).

  The agent is the one -agent names; else the one the tar was taken of,
  when this Bottlefile declares it; else the only agent there is.

Options:

  -agent=agent.NAME    The agent the snapshot is for.
  -lock-timeout=DUR    Wait this long for the state lock (default 0s).
  -var NAME=VALUE      Set a variable. Repeatable.
  -var-file=FILE       Set variables from an HCL or JSON file.
`)
}

func (c *SnapshotImportCommand) Run(args []string) int {
	m := c.Meta
	fs := newFlagSet("snapshot import")
	agentFlag := fs.String("agent", "", "")
	lockTimeout := fs.Duration("lock-timeout", 0, "")
	in := registerInputs(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return m.fail("Invalid command line", fmt.Errorf("%v. Run with -help to see the options", err))
	}
	if len(pos) != 1 {
		return m.fail("Invalid command line", errors.New("snapshot import needs one file: the tar snapshot export wrote (or - for standard input)"))
	}
	file := pos[0]

	var src io.Reader
	var taken string // the address the tar says it was taken at, if any
	if file == "-" {
		if *agentFlag == "" {
			return m.fail("Invalid command line", errors.New("snapshot import - (standard input) needs -agent=agent.NAME"))
		}
		src = m.Stdin
	} else {
		f, err := os.Open(file)
		if err != nil {
			return m.fail("Cannot read the snapshot", err)
		}
		defer f.Close()
		taken = tarAddress(f)
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return m.fail("Cannot read the snapshot", err)
		}
		src = f
	}

	ctx := m.Ctx
	op, diags := m.openOperation(ctx, false, *lockTimeout, *in)
	defer op.close()
	if m.showDiags(op.files(), diags) {
		return 1
	}
	agentName, err := importAgent(op, *agentFlag, taken)
	if err != nil {
		return m.fail("Which agent?", err)
	}
	agent := op.config.Agents[agentName]
	agentAddr := agent.Addr()
	rt, ok := op.runtimes[agent.RuntimeName]
	if !ok {
		return m.fail("Runtime not available", fmt.Errorf("%s runs on runtime %q, which could not be configured", agentAddr, agent.RuntimeName))
	}
	importer, ok := rt.Driver.(drivers.SnapshotImporter)
	if !ok {
		return m.fail("Cannot import", fmt.Errorf("the %s driver of runtime %q cannot import snapshots", rt.Driver.Name(), rt.Name))
	}

	lineage, err := op.store.Init()
	if err != nil {
		return m.fail("Cannot write state", err)
	}
	records, err := op.store.Records()
	if err != nil {
		return m.fail("Cannot read state", err)
	}
	known := make([]string, 0, len(records))
	for _, r := range records {
		known = append(known, r.Addr)
	}
	// What is live but unrecorded (an interrupted apply) keeps its number too.
	if live, err := rt.Driver.Read(ctx, drivers.ReadRequest{Lineage: lineage}); err == nil {
		for _, o := range live.Objects {
			known = append(known, o.Addr)
		}
	} else {
		return m.fail(fmt.Sprintf("Cannot refresh runtime %q", rt.Name), err)
	}
	addr := nextPolicySnapshot(agentAddr, known)

	attrs := map[string]cty.Value{
		"agent":       cty.StringVal(agentAddr),
		"description": cty.StringVal("imported from " + file),
		"triggers":    cty.NullVal(cty.Map(cty.String)),
		"policy":      cty.True,
		"trigger":     cty.StringVal("import"), // what took it, for snapshot list
	}
	hash, attrHashes := snapshotFingerprint(attrs)
	obj := drivers.Object{Addr: addr, Kind: drivers.KindSnapshot, Attrs: attrs, InPlace: []string{"description"}}

	start := time.Now()
	resp, err := importer.ImportSnapshot(ctx, drivers.ImportRequest{Lineage: lineage, Object: obj, Hash: hash}, src)
	if err != nil {
		return m.fail("Import failed", err)
	}
	after := make(map[string]json.RawMessage, len(attrs))
	for name, v := range attrs {
		after[name] = planner.RedactedJSON(v)
	}
	if err := op.store.Put(state.Record{
		Addr: addr, Kind: drivers.KindSnapshot, Driver: rt.Driver.Name(), Runtime: rt.Name, ID: resp.ID,
		Hash: hash, Attrs: after, AttrHashes: attrHashes, Computed: resp.Computed,
	}); err != nil {
		return m.fail("Cannot record the snapshot", fmt.Errorf("%w; the image was loaded but not recorded: the next plan removes it", err))
	}
	fmt.Fprintf(m.Stdout, "Imported %s as %s on runtime %q (%s, %s) in %s.\n", file, addr, rt.Name, resp.Computed["image"], sizeWords(atoi(resp.Computed["size"])), time.Since(start).Round(time.Millisecond))
	if _, running, _ := op.store.Get(agentAddr); running {
		fmt.Fprintf(m.Stdout, "%s exists now; it resumes from its newest snapshot the next time it is created or replaced (a snapshot_policy may take a newer one first).\n", agentAddr)
	} else {
		fmt.Fprintf(m.Stdout, "The next apply creates %s from it (unless resume = false).\n", agentAddr)
	}
	return 0
}

// importAgent picks the agent an import is for: -agent, else the agent of
// the address the tar was taken at when the Bottlefile declares it, else
// the only agent.
func importAgent(op *operation, flagValue, taken string) (string, error) {
	names := op.config.AgentNames()
	if flagValue != "" {
		name := strings.TrimPrefix(flagValue, "agent.")
		if _, ok := op.config.Agents[name]; !ok || strings.Contains(name, ".") {
			return "", fmt.Errorf("-agent=%s: the Bottlefile declares no such agent (it declares: %s)", flagValue, agentList(names))
		}
		return name, nil
	}
	if rest, ok := strings.CutPrefix(taken, "agent."); ok {
		name, _, _ := strings.Cut(rest, ".")
		if _, ok := op.config.Agents[name]; ok {
			return name, nil
		}
	}
	if len(names) == 1 {
		return names[0], nil
	}
	why := "the tar does not say which agent it was taken of"
	if taken != "" {
		why = fmt.Sprintf("the tar was taken at %s, which names no agent of this Bottlefile", taken)
	}
	return "", fmt.Errorf("%s; name the agent with -agent=agent.NAME (the Bottlefile declares: %s)", why, agentList(names))
}

func agentList(names []string) string {
	if len(names) == 0 {
		return "no agent"
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "agent." + n
	}
	return strings.Join(out, ", ")
}

// nextPolicySnapshot is the address of the agent's next policy snapshot:
// agent.NAME.snapshot.N with N one above any taken.
func nextPolicySnapshot(agentAddr string, taken []string) string {
	next := 1
	for _, addr := range taken {
		rest, ok := strings.CutPrefix(addr, agentAddr+".snapshot.")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil && n >= next {
			next = n + 1
		}
	}
	return fmt.Sprintf("%s.snapshot.%d", agentAddr, next)
}

// snapshotFingerprint hashes a policy snapshot's attributes the way the
// planner does (planner.fingerprint), so that the next plan finds the
// record in line with what it wants for it: each attribute as
// sha256("name=" + JSON), the whole as sha256 of the kind and the sorted
// "name=hash" pairs. snapshot_cmd_test checks that the next plan agrees.
func snapshotFingerprint(attrs map[string]cty.Value) (string, map[string]string) {
	hashes := make(map[string]string, len(attrs))
	for name, v := range attrs {
		var x any
		switch {
		case v.IsNull():
		case v.Type() == cty.String:
			x = v.AsString()
		case v.Type() == cty.Bool:
			x = v.True()
		}
		data, _ := json.Marshal(x)
		h := sha256.Sum256(append([]byte(name+"="), data...))
		hashes[name] = hex.EncodeToString(h[:8])
	}
	names := make([]string, 0, len(hashes))
	for name := range hashes {
		names = append(names, name)
	}
	sort.Strings(names)
	whole := sha256.New()
	whole.Write([]byte(drivers.KindSnapshot))
	for _, name := range names {
		whole.Write([]byte{0})
		whole.Write([]byte(name + "=" + hashes[name]))
	}
	return hex.EncodeToString(whole.Sum(nil)[:16]), hashes
}

// tarAddress reads the address label of the image in a docker-save tar,
// to tell which agent it was taken of; "" when it has none or the file is
// no such tar (the runtime's driver reports what is wrong with it).
func tarAddress(f io.ReadSeeker) string {
	addr, _ := readTarAddress(f)
	return addr
}

func readTarAddress(f io.ReadSeeker) (string, error) {
	tr := tar.NewReader(f)
	var configPath string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading it as a tar: %w (snapshot export writes docker-save tars)", err)
		}
		if path.Clean(hdr.Name) != "manifest.json" {
			continue
		}
		var manifest []struct{ Config string }
		if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&manifest); err != nil {
			return "", fmt.Errorf("its manifest.json: %w", err)
		}
		if len(manifest) != 1 {
			return "", fmt.Errorf("it holds %d images; a snapshot tar holds one", len(manifest))
		}
		configPath = path.Clean(manifest[0].Config)
		break
	}
	if configPath == "" {
		return "", errors.New("it has no manifest.json: it is not a docker-save tar (snapshot export writes those)")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tr = tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if path.Clean(hdr.Name) != configPath {
			continue
		}
		var cfg struct {
			Config struct{ Labels map[string]string }
		}
		if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&cfg); err != nil {
			return "", fmt.Errorf("its image config: %w", err)
		}
		return cfg.Config.Labels[drivers.LabelAddress], nil
	}
}

// parseInterleaved parses flags that may come before or after the
// positional arguments ("export ADDR -o FILE"), and returns the latter.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// writeAtomically writes a file through a temporary one beside it, so the
// file is complete or absent, and returns the bytes written.
func writeAtomically(name string, write func(io.Writer) error) (int64, error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".partial-*")
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	cw := &countingWriter{w: tmp}
	if err := write(cw); err != nil {
		return cw.n, err
	}
	if err := tmp.Sync(); err != nil {
		return cw.n, err
	}
	if err := tmp.Close(); err != nil {
		return cw.n, err
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return cw.n, err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return cw.n, err
	}
	done = true
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// sizeWords renders a byte count for humans.
func sizeWords(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for x := n / unit; x >= unit; x /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
