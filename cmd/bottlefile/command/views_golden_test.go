package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/operations"
	"github.com/bottlefile/bottlefile/planner"
)

// The views of apply progress, status, denials and validate's diagnostics
// render the same structured data for people and as JSON: each is fed the
// same fixture in both forms and compared with its golden file under
// testdata/views (go test -update rewrites them; review the diff).

// eventTimes are what differs between runs in JSON events.
var eventTimes = regexp.MustCompile(`"time":"[^"]*"`)

func TestApplyViewsGolden(t *testing.T) {
	events := []jsonEvent{
		{Type: "apply_start", Address: "agent.coder.network", Step: string(planner.StepCreate)},
		{Type: "apply_complete", Address: "agent.coder.network", Step: string(planner.StepCreate), Elapsed: 0.0123},
		{Type: "apply_start", Address: "agent.coder", Step: string(planner.StepCreate)},
		{Type: "apply_progress", Address: "agent.coder", Step: string(planner.StepCreate), Elapsed: 10},
		{Type: "apply_errored", Address: "agent.coder", Step: string(planner.StepCreate), Elapsed: 12.34, Message: `image "busybox:1" not found`},
		{Type: "apply_start", Address: "agent.coder.gateway", Step: string(planner.StepUpdate)},
		{Type: "apply_note", Address: "agent.coder.gateway", Step: string(planner.StepUpdate), Message: "closed 2 tunnels the new allowlist no longer allows"},
		{Type: "apply_complete", Address: "agent.coder.gateway", Step: string(planner.StepUpdate), Elapsed: 1.5},
		{Type: "apply_skipped", Address: "agent.follower", Step: string(planner.StepCreate), Cause: "create agent.coder"},
		{Type: "apply_skipped", Address: "agent.late", Step: string(planner.StepCreate)},
	}
	diags := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot create agent.coder", Detail: `image "busybox:1" not found`}}
	for _, tc := range []struct {
		name string
		sum  applySummary
	}{
		{"apply-incomplete", applySummary{Failed: true, Done: planner.Summary{Add: 1, Change: 1},
			FailedSteps: []string{"create agent.coder"}, Skipped: []string{"create agent.follower", "create agent.late"}}},
		{"apply-state-unwritten", applySummary{Failed: true, Done: planner.Summary{Add: 1},
			FailedSteps: []string{"create agent.coder"}, StateErr: errors.New("writing state: no space left on device")}},
		{"destroy-complete", applySummary{Destroy: true, Done: planner.Summary{Destroy: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, asJSON := range []bool{false, true} {
				var out, errs bytes.Buffer
				v := newApplyView(&Meta{Stdout: &out, Stderr: &errs}, asJSON)
				v.Message("The saved plan was made 2 minutes ago.")
				v.Starting()
				for _, e := range events {
					v.Event(e)
				}
				if tc.sum.Failed && !v.Diagnostics(nil, diags) {
					t.Error("an error diagnostic is not reported as one")
				}
				v.Summary(tc.sum)
				v.Outputs([]operations.Output{})
				got, ext := out.String()+errs.String(), ".txt"
				if asJSON {
					if errs.Len() > 0 {
						t.Errorf("apply -json wrote to stderr: %s", errs.String())
					}
					got, ext = eventTimes.ReplaceAllString(out.String(), `"time":"TIME"`), ".jsonl"
				}
				golden(t, "testdata/views/"+tc.name+ext, got)
			}
		})
	}
}

func TestDenialsViewsGolden(t *testing.T) {
	f, err := os.Open("testdata/views/decisions.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC)
	decs, err := operations.ParseDecisions(f, "agent.coder", at.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]denialsReport{
		"denials":      {Denials: operations.Denials(decs), Injected: operations.Injections(decs), Since: 24 * time.Hour, At: at},
		"denials-none": {Since: time.Hour, At: at},
	} {
		for _, asJSON := range []bool{false, true} {
			var out bytes.Buffer
			if err := newDenialsView(asJSON, &out).Denials(r); err != nil {
				t.Fatal(err)
			}
			ext := map[bool]string{false: ".txt", true: ".json"}[asJSON]
			golden(t, "testdata/views/"+name+ext, out.String())
		}
	}
}

func TestStatusViewsGolden(t *testing.T) {
	at := time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC)
	code, denied, written := 137, 4, int64(3<<20)
	bottles := []operations.BottleStatus{{
		Addr: "agent.coder", Runtime: "local", Driver: "docker", BootSnapshot: "agent.coder.snapshot.2",
		Newest:      &operations.Snapshot{Addr: "agent.coder.snapshot.2", Taken: at.Add(-3 * time.Hour), Size: 120 << 20},
		EgressKnown: true, Egress: []string{"github.com:443", "pypi.org:443"}, Denials: &denied,
		Workloads: []operations.WorkloadStatus{
			{Addr: "agent.coder", Role: "agent", ID: "c1", State: operations.WorkloadRunning, Started: at.Add(-90 * time.Minute), Written: &written},
			{Addr: "agent.coder.sidecar.db", Role: "sidecar", ID: "c2", State: operations.WorkloadExited, ExitCode: &code, Finished: at.Add(-5 * time.Minute)},
			{Addr: "agent.coder.gateway", Role: "gateway", ID: "c3", State: operations.WorkloadRunning, Started: at.Add(-90 * time.Minute), Drift: "its rules file was changed by hand"},
		},
	}}
	for name, bs := range map[string][]operations.BottleStatus{"status": bottles, "status-none": nil} {
		for _, asJSON := range []bool{false, true} {
			var out bytes.Buffer
			if err := newStatusView(asJSON, &out).Status(bs, at); err != nil {
				t.Fatal(err)
			}
			ext := map[bool]string{false: ".txt", true: ".json"}[asJSON]
			golden(t, "testdata/views/"+name+ext, out.String())
		}
	}
}

// TestValidateViewsGolden: validate's diagnostics, for people (standard
// error, with the line they point at) and as one JSON document.
func TestValidateViewsGolden(t *testing.T) {
	w := newWorkspace(t)
	w.write("agent \"coder\" {\n  image = \"busybox:1\"\n  memroy = \"512MiB\"\n}\n")
	for _, asJSON := range []bool{false, true} {
		args, ext := []string{"-no-color"}, ".txt"
		if asJSON {
			args, ext = []string{"-json"}, ".json"
		}
		code, out, errs := w.run("validate", args...)
		if code != 1 {
			t.Errorf("validate %v: exit %d, want 1", args, code)
		}
		golden(t, "testdata/views/validate-invalid"+ext, w.normalize(out+errs))
	}
	w.write("agent \"coder\" {\n  image = \"busybox:1\"\n}\n")
	code, out, errs := w.run("validate", "-json")
	if code != 0 {
		t.Errorf("validate -json of a valid file: exit %d\n%s", code, errs)
	}
	golden(t, "testdata/views/validate-valid.json", out)
}

func TestStateViewsGolden(t *testing.T) {
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	st := &operations.State{Lineage: "7d1e2f", Serial: 4, Records: []operations.Record{
		{Addr: "agent.coder", Kind: "container", Driver: "docker", Runtime: "default", ID: "c1", Hash: "h1", Workload: true,
			DependsOn: []string{"agent.coder.network"}, Attrs: map[string]json.RawMessage{"image": []byte(`"busybox:1"`), "memory": []byte(`null`)},
			Computed: map[string]string{"boot_from": "agent.coder.snapshot.1"}, PreventDestroy: true, CreatedAt: at, UpdatedAt: at.Add(time.Hour)},
		{Addr: "agent.coder.network", Kind: "network", Driver: "docker", Runtime: "default", ID: "n1", Hash: "h2", CreatedAt: at, UpdatedAt: at},
	}}
	for name, s := range map[string]*operations.State{"state": st, "state-empty": {Lineage: "7d1e2f"}} {
		for _, asJSON := range []bool{false, true} {
			var out bytes.Buffer
			if err := newStateView(asJSON, &out).State(s); err != nil {
				t.Fatal(err)
			}
			ext := map[bool]string{false: ".txt", true: ".json"}[asJSON]
			golden(t, "testdata/views/"+name+ext, out.String())
		}
	}
}
