package drivertest

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/workloadattr"
)

// checkDeclaration checks that what a driver declares matches what it
// implements.
func checkDeclaration(t *testing.T, d drivers.Driver, decl drivers.Declaration) {
	caps := decl.Capabilities
	if decl.Schema.Runtime == nil {
		t.Error("Schema.Runtime is nil: a driver with no runtime attributes declares an empty spec")
	}
	_, exports := drivers.As[drivers.SnapshotExporter](d)
	_, imports := drivers.As[drivers.SnapshotImporter](d)
	_, logs := drivers.As[drivers.LogReader](d)
	_, execs := drivers.As[drivers.Execer](d)
	_, activity := drivers.As[drivers.ActivityReader](d)
	for _, c := range []struct {
		what               string
		declared, hasIface bool
	}{
		{"snapshot export (SnapshotExporter)", caps.Snapshots.Export, exports},
		{"snapshot import (SnapshotImporter)", caps.Snapshots.Import, imports},
		{"logs (LogReader)", caps.Logs, logs},
		{"exec (Execer)", caps.Exec, execs},
		{"activity (ActivityReader)", caps.Activity, activity},
	} {
		if c.declared != c.hasIface {
			t.Errorf("%s: declared %v, implemented %v", c.what, c.declared, c.hasIface)
		}
	}
	if _, settles := drivers.As[drivers.Settler](d); caps.Healthcheck && !settles {
		t.Error("healthcheck: declared, but the driver is no Settler: nothing would wait for a workload to be healthy")
	}
	if caps.Snapshots.Take != (caps.Snapshots.Format != "") {
		t.Errorf("snapshots: Take %v with Format %q: a driver that takes snapshots says what they are", caps.Snapshots.Take, caps.Snapshots.Format)
	}
	for _, a := range caps.Attributes {
		if !slices.Contains(drivers.WorkloadAttributes, a) {
			t.Errorf("Attributes names %q, which is no workload attribute", a)
		}
	}
	for _, a := range caps.InPlace {
		if !slices.Contains(caps.Attributes, a) && a != "egress" {
			t.Errorf("InPlace names %q, which is not among the attributes the driver honours", a)
		}
	}
}

// egressKinds are rules of each kind CheckRule tells apart, and whether
// a driver with caps declares it.
var egressKinds = []struct {
	rule     string
	declared func(drivers.EgressCapabilities) bool
}{
	{"example.com", func(e drivers.EgressCapabilities) bool { return e.Names }},
	{"*.example.com", func(e drivers.EgressCapabilities) bool { return e.Wildcards && e.Names }},
	{"example.com:22", func(e drivers.EgressCapabilities) bool { return e.Ports && e.Names }},
	{"203.0.113.7", func(e drivers.EgressCapabilities) bool { return e.Addresses }},
	{"198.51.100.0/24", func(e drivers.EgressCapabilities) bool { return e.CIDRs }},
}

// checkRefusals checks that what the driver does not declare is refused,
// by the generic check and by the driver's own Plan, and that what it
// declares of egress passes the check.
func checkRefusals(t *testing.T, d drivers.Driver, caps drivers.Capabilities, image string) {
	name := d.Name()
	type feature struct {
		what string
		edit func(a *drivers.AgentSpec)
	}
	var refused []feature
	if !caps.Sidecars {
		refused = append(refused, feature{"a sidecar", func(a *drivers.AgentSpec) {
			a.Sidecars = []drivers.SidecarSpec{{Addr: a.Addr + ".sidecar.helper", Name: "helper", Workload: drivers.MustWorkload(map[string]cty.Value{"image": cty.StringVal(image)})}}
		}})
	}
	if !caps.Build {
		refused = append(refused, feature{"a build block", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "image", cty.NullVal(cty.String))
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "build", drivers.BuildValue(t.TempDir(), "Dockerfile"))
		}})
	}
	if !caps.Healthcheck {
		refused = append(refused, feature{"a healthcheck block", func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "healthcheck", cty.ObjectVal(map[string]cty.Value{
				"command": cty.ListVal([]cty.Value{cty.StringVal("true")}), "interval": cty.StringVal("1s"),
				"timeout": cty.StringVal("1s"), "retries": cty.NumberIntVal(1), "start_period": cty.StringVal("0s"),
			}))
		}})
	}
	for _, attr := range drivers.WorkloadAttributes {
		if slices.Contains(caps.Attributes, attr) {
			continue
		}
		row, _ := workloadattr.Lookup(attr)
		v := row.Example
		refused = append(refused, feature{"attribute " + attr, func(a *drivers.AgentSpec) { a.Workload = drivers.WithWorkloadAttr(a.Workload, attr, v) }})
	}
	for _, k := range egressKinds {
		if k.declared(caps.Egress) {
			a := conformanceAgent(image)
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "egress", cty.ListVal([]cty.Value{cty.StringVal(k.rule)}))
			if r := drivers.CheckAgent(name, caps, a); len(r) != 0 {
				t.Errorf("egress rule %q is of a kind the %s driver declares, but the check refuses it: %v", k.rule, name, r)
			}
			continue
		}
		rule := k.rule
		refused = append(refused, feature{"egress rule " + rule, func(a *drivers.AgentSpec) {
			a.Workload = drivers.WithWorkloadAttr(a.Workload, "egress", cty.ListVal([]cty.Value{cty.StringVal("example.org"), cty.StringVal(rule)}))
		}})
	}
	if len(refused) == 0 {
		t.Logf("the %s driver declares every agent feature: nothing to refuse", name)
	}
	for _, f := range refused {
		a := conformanceAgent(image)
		f.edit(&a)
		rs := drivers.CheckAgent(name, caps, a)
		switch {
		case len(rs) == 0:
			t.Errorf("%s is not declared, but the capability check accepts it", f.what)
			continue
		case !strings.Contains(rs[0].Message, name):
			t.Errorf("%s: the refusal %q does not name the driver %q", f.what, rs[0].Message, name)
		}
		if strings.HasPrefix(f.what, "egress rule") && (rs[0].Block != "egress" || rs[0].Rule != 1) {
			t.Errorf("%s: refused as %+v, want the rule at index 1", f.what, rs[0])
		}
		if _, err := d.Plan(t.Context(), drivers.PlanRequest{Agent: a}); err == nil {
			t.Errorf("%s is not declared, but Plan accepts it", f.what)
		}
	}
}

// snapshotObject is a policy snapshot of agent as the core plans it.
func snapshotObject(addr, agent string) drivers.Object {
	return drivers.Object{Addr: addr, Kind: drivers.KindSnapshot, Attrs: map[string]cty.Value{
		"agent":       cty.StringVal(agent),
		"description": cty.NullVal(cty.String),
		"triggers":    cty.NullVal(cty.Map(cty.String)),
		"policy":      cty.True,
		"trigger":     cty.StringVal("take"),
	}}
}

// checkSnapshots takes a snapshot of the agent's running workload, reads
// it, exports and imports it as declared, and deletes what it made, each
// delete twice.
func checkSnapshots(t *testing.T, d drivers.Driver, h Harness, caps drivers.SnapshotCapabilities, lineage string, agent drivers.AgentSpec) {
	snap := snapshotObject(agent.Addr+".snapshot.1", agent.Addr)
	taken, err := d.Apply(t.Context(), drivers.ApplyRequest{
		Op: drivers.OpCreate, Lineage: lineage, Object: snap, Hash: testHash(lineage, snap.Addr), Agent: &agent,
	})
	if err != nil {
		t.Fatalf("taking a snapshot: %v", err)
	}
	del := func(l, id string, obj drivers.Object) {
		t.Helper()
		for i := range 2 {
			if _, err := d.Apply(t.Context(), drivers.ApplyRequest{Op: drivers.OpDelete, Lineage: l, ID: id, Object: drivers.Object{Addr: obj.Addr, Kind: obj.Kind}}); err != nil {
				t.Errorf("deleting snapshot %s (time %d): %v", obj.Addr, i+1, err)
			}
		}
		if _, ok := addrIDs(t, d, l)[obj.Addr]; ok {
			t.Errorf("Read reports snapshot %s after its delete", obj.Addr)
		}
	}
	defer del(lineage, taken.ID, snap)
	if taken.ID == "" || snapshotImage(taken) == "" {
		t.Fatalf("a snapshot create returned ID %q, image %q: want both", taken.ID, snapshotImage(taken))
	}
	if got := addrIDs(t, d, lineage)[snap.Addr]; got != taken.ID {
		t.Errorf("Read reports snapshot %s with ID %q, want %q", snap.Addr, got, taken.ID)
	}

	var archive []byte
	if caps.Export {
		ex, _ := drivers.As[drivers.SnapshotExporter](d)
		var buf bytes.Buffer
		if err := ex.ExportSnapshot(t.Context(), snapshotImage(taken), &buf); err != nil {
			t.Fatalf("exporting the snapshot: %v", err)
		}
		if buf.Len() == 0 {
			t.Fatal("the export wrote nothing")
		}
		archive = buf.Bytes()
	} else if caps.Import && h.ImportArchive != nil {
		archive = h.ImportArchive(t)
	}
	if !caps.Import {
		return
	}
	if archive == nil {
		t.Skip("the driver imports snapshots, but the harness has no archive to import")
	}
	im, _ := drivers.As[drivers.SnapshotImporter](d)
	other := uuid.NewString()
	in := snapshotObject(agent.Addr+".snapshot.2", agent.Addr)
	got, err := im.ImportSnapshot(t.Context(), drivers.ImportRequest{Lineage: other, Object: in, Hash: testHash(other, in.Addr)}, bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("importing the snapshot: %v", err)
	}
	defer del(other, got.ID, in)
	if got.ID == "" || snapshotImage(got) == "" {
		t.Errorf("an import returned ID %q, image %q: want both", got.ID, snapshotImage(got))
	}
	if id := addrIDs(t, d, other)[in.Addr]; id != got.ID {
		t.Errorf("Read of the importing lineage reports %s with ID %q, want %q", in.Addr, id, got.ID)
	}
	if _, ok := addrIDs(t, d, lineage)[in.Addr]; ok {
		t.Errorf("the snapshot imported into another lineage is read in the first")
	}
}

// snapshotImage is the image a snapshot create or import returned; "" when
// it returned no snapshot result.
func snapshotImage(r drivers.ApplyResponse) string {
	if r.Snapshot == nil {
		return ""
	}
	return r.Snapshot.Image
}
