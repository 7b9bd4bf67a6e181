package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/dockersave"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/planner"
	"github.com/bottlefile/bottlefile/state"
)

// Export is a recorded snapshot ready to be written out by its runtime.
type Export struct {
	Addr, Image, Runtime string
	exporter             drivers.SnapshotExporter
}

// PrepareExport finds the snapshot recorded at addr and a runtime that can
// export it, before anything is written.
func (op *Operation) PrepareExport(addr string) (*Export, hcl.Diagnostics) {
	rec, ok, err := op.Store.Get(addr)
	if err != nil {
		return nil, hcl.Diagnostics{errorDiag("Cannot read state", err.Error())}
	}
	if !ok {
		return nil, hcl.Diagnostics{unknownAddress("No such snapshot", fmt.Sprintf("The state records no object at %s; `bottlefile state list` lists what it records.", addr), addr, op.knownAddresses())}
	}
	if rec.Kind != drivers.KindSnapshot {
		return nil, hcl.Diagnostics{errorDiag("Not a snapshot", fmt.Sprintf("%s is a %s, not a snapshot", addr, rec.Kind))}
	}
	snap, _ := drivers.RecordedSnapshot(rec.Computed)
	image := snap.Image
	if image == "" {
		return nil, hcl.Diagnostics{errorDiag("Snapshot has no image", fmt.Sprintf("the state records no image for %s; plan and apply to take it again", addr))}
	}
	rt, ok := op.Runtimes[rec.Runtime]
	if !ok {
		return nil, hcl.Diagnostics{errorDiag("Runtime not available", fmt.Sprintf("%s is on runtime %q, which the Bottlefile does not declare (or which could not be configured)", addr, rec.Runtime))}
	}
	exporter, ok := drivers.As[drivers.SnapshotExporter](rt.Driver)
	if !ok {
		return nil, hcl.Diagnostics{errorDiag("Cannot export", fmt.Sprintf("the %s driver of runtime %q cannot export snapshots", rt.Driver.Name(), rec.Runtime))}
	}
	return &Export{Addr: addr, Image: image, Runtime: rec.Runtime, exporter: exporter}, nil
}

// Write streams the snapshot to w as a docker-save tar.
func (e *Export) Write(ctx context.Context, w io.Writer) error {
	return e.exporter.ExportSnapshot(ctx, e.Image, w)
}

// ImportRequest is one snapshot tar to load.
type ImportRequest struct {
	// Agent is the agent it is for (-agent); "" chooses: the agent the tar
	// was taken of (TarAddress) when the Bottlefile declares it, else the
	// only agent.
	Agent string
	// Taken is the address the tar says it was taken at, if any.
	Taken string
	// Source names the tar in the snapshot's description.
	Source string
	Tar    io.Reader
}

// Imported is the snapshot an import recorded.
type Imported struct {
	Addr, Agent, Runtime, Image string
	Size                        int64 // bytes; -1 when the runtime did not say
	// AgentExists is whether the agent has a workload now (it resumes from
	// the import only when next created).
	AgentExists bool
}

// ImportSnapshot loads a snapshot tar into the runtime of an agent and
// records it as the agent's next policy snapshot, with the attributes and
// fingerprint the planner would give it, so the next plan leaves it be
// and the agent resumes from it when next created.
func (op *Operation) ImportSnapshot(ctx context.Context, req ImportRequest) (Imported, hcl.Diagnostics) {
	var out Imported
	fail := func(summary string, err error) (Imported, hcl.Diagnostics) {
		return out, hcl.Diagnostics{errorDiag(summary, err.Error())}
	}
	agentName, err := op.importAgent(req.Agent, req.Taken)
	if err != nil {
		return fail("Which agent?", err)
	}
	agent := op.Config.Agents[agentName]
	out.Agent = agent.Addr()
	rt, ok := op.Runtimes[agent.RuntimeName]
	if !ok {
		return fail("Runtime not available", fmt.Errorf("%s runs on runtime %q, which could not be configured", out.Agent, agent.RuntimeName))
	}
	importer, ok := drivers.As[drivers.SnapshotImporter](rt.Driver)
	if !ok {
		return fail("Cannot import", fmt.Errorf("the %s driver of runtime %q cannot import snapshots", rt.Driver.Name(), rt.Name))
	}

	lineage, err := op.Store.Init()
	if err != nil {
		return fail("Cannot write state", err)
	}
	records, err := op.Store.Records()
	if err != nil {
		return fail("Cannot read state", err)
	}
	known := make([]string, 0, len(records))
	for _, r := range records {
		known = append(known, r.Addr)
	}
	// What is live but unrecorded (an interrupted apply) keeps its number too.
	live, err := rt.Driver.Read(ctx, drivers.ReadRequest{Lineage: lineage})
	if err != nil {
		return fail(fmt.Sprintf("Cannot refresh runtime %q", rt.Name), err)
	}
	for _, o := range live.Objects {
		known = append(known, o.Addr)
	}
	out.Addr = planner.NextPolicySnapshot(out.Agent, known)
	out.Runtime = rt.Name

	attrs := map[string]cty.Value{
		"agent":       cty.StringVal(out.Agent),
		"description": cty.StringVal("imported from " + req.Source),
		"triggers":    cty.NullVal(cty.Map(cty.String)),
		"policy":      cty.True,
		"trigger":     cty.StringVal("import"), // what took it, for snapshot list
	}
	fp := planner.FingerprintOf(drivers.KindSnapshot, attrs)
	hash, attrHashes := fp.Hash, fp.Attrs
	obj := drivers.Object{Addr: out.Addr, Kind: drivers.KindSnapshot, Attrs: attrs, InPlace: []string{"description"}}
	resp, err := importer.ImportSnapshot(ctx, drivers.ImportRequest{Lineage: lineage, Object: obj, Hash: hash}, req.Tar)
	if err != nil {
		return fail("Import failed", err)
	}
	after := make(map[string]json.RawMessage, len(attrs))
	for name, v := range attrs {
		after[name] = planner.RedactedJSON(v)
	}
	if err := op.Store.Put(state.Record{
		Addr: out.Addr, Kind: drivers.KindSnapshot, Driver: rt.Driver.Name(), Runtime: rt.Name, ID: resp.ID,
		Hash: hash, Attrs: after, AttrHashes: attrHashes, Computed: resp.RecordComputed(),
	}); err != nil {
		return fail("Cannot record the snapshot", fmt.Errorf("%w; the image was loaded but not recorded: the next plan removes it", err))
	}
	out.Image, out.Size = "", -1
	if s := resp.Snapshot; s != nil {
		out.Image, out.Size = s.Image, s.Size
	}
	_, out.AgentExists, _ = op.Store.Get(out.Agent)
	return out, nil
}

// importAgent picks the agent an import is for: -agent, else the agent of
// the address the tar was taken at when the Bottlefile declares it, else
// the only agent.
func (op *Operation) importAgent(flagValue, taken string) (string, error) {
	names := op.Config.AgentNames()
	if flagValue != "" {
		name := flagValue // NAME or agent.NAME
		if a, err := addrs.Parse(flagValue); err == nil && a.IsAgent() {
			name = a.Name()
		}
		if _, ok := op.Config.Agents[name]; !ok || strings.Contains(name, ".") {
			return "", fmt.Errorf("-agent=%s: the Bottlefile declares no such agent (it declares: %s)", flagValue, agentList(names))
		}
		return name, nil
	}
	if a, ok := addrs.AgentOf(taken); ok {
		if _, ok := op.Config.Agents[a.Name()]; ok {
			return a.Name(), nil
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
		out[i] = addrs.Agent(n).String()
	}
	return strings.Join(out, ", ")
}

// TarAddress reads the address label of the image in a docker-save tar,
// to tell which agent it was taken of; "" when it has none or the file is
// no such tar (the runtime's driver reports what is wrong with it).
func TarAddress(f io.ReadSeeker) string {
	labels, _ := dockersave.Labels(f)
	return labels[drivers.LabelAddress]
}
