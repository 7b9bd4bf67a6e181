package command

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/drivertest"
	"github.com/bottlefile/bottlefile/state"
)

// TestPlanGolden renders plans that cover every action kind, the reasons
// for actions the configuration did not cause, and forcing attributes, in
// human and JSON form. Each case in testdata/plans has an optional
// before.hcl (applied first), an after.hcl (planned), and the golden
// plan.txt and plan.json. Each plan is also saved, shown from the file
// (the same text and JSON) and applied from it.
func TestPlanGolden(t *testing.T) {
	cases := []struct {
		name string
		// setup runs before anything is applied.
		setup func(w *workspace)
		drift func(w *workspace, f *drivertest.Fake, lineage string)
		args  []string
		// check are the plan arguments that must show no changes after the
		// apply; nil means args.
		check []string
	}{
		{name: "create"},
		{name: "no-changes"},
		{name: "replace"},
		{name: "update-in-place"},
		{name: "delete"},
		{name: "destroy", args: []string{"-destroy"}},
		{name: "sensitive"},
		{name: "start", drift: func(_ *workspace, f *drivertest.Fake, l string) { f.Stop(l, "agent.coder") }},
		{name: "exited", drift: func(_ *workspace, f *drivertest.Fake, l string) {
			// The agent's command was a typo: it exited on its own.
			f.ExitWith(l, "agent.coder", drivers.Exit{Code: 127, At: time.Date(2026, 11, 25, 10, 14, 3, 0, time.UTC),
				Last: []string{"[FATAL tini (7)] exec claud failed: No such file or directory"}})
		}},
		{name: "stopped", drift: func(_ *workspace, f *drivertest.Fake, l string) {
			// Someone ran docker stop: killed by a signal, not exited.
			f.ExitWith(l, "agent.coder", drivers.Exit{Code: 137, At: time.Date(2026, 11, 25, 10, 14, 3, 0, time.UTC), Stopped: true})
		}},
		{name: "exited-and-stopped", drift: func(_ *workspace, f *drivertest.Fake, l string) {
			// In one plan: an agent that exited on its own (its command
			// was a typo) next to one someone stopped.
			f.ExitWith(l, "agent.coder", drivers.Exit{Code: 127, At: time.Date(2026, 11, 25, 10, 14, 3, 0, time.UTC),
				Last: []string{"[FATAL tini (7)] exec claud failed: No such file or directory"}})
			f.ExitWith(l, "agent.reviewer", drivers.Exit{Code: 143, At: time.Date(2026, 11, 25, 10, 20, 0, 0, time.UTC), Stopped: true})
		}},
		{name: "deleted-out-of-band", drift: func(_ *workspace, f *drivertest.Fake, l string) { f.Remove(l, "agent.coder") }},
		{name: "network-replaced", drift: func(_ *workspace, f *drivertest.Fake, l string) {
			// The network was re-created outside bottlefile: same address,
			// new id, made from another configuration.
			recreate(f, l, "agent.coder.network", "other-config")
		}},
		{name: "recreated-by-crash", drift: func(_ *workspace, f *drivertest.Fake, l string) {
			// An apply re-made the network from this configuration and was
			// cut off before recording it: it is recorded, not replaced, and
			// the container still recorded on the old one is replaced.
			recreate(f, l, "agent.coder.network", "")
		}},
		{name: "unfinished-recreated", drift: func(w *workspace, f *drivertest.Fake, l string) {
			// A cut-off apply removed the recorded one and made another,
			// and was cut off again before it was ready: replaced.
			for _, o := range f.Objects(l) {
				if o.Addr == "agent.coder" {
					o.ID, o.Running, o.Unfinished = "fake-recreated", false, true
					f.Put(l, o)
				}
			}
		}},
		{name: "never-started-refresh-only", args: []string{"-refresh-only"}, drift: func(w *workspace, f *drivertest.Fake, l string) {
			// Refreshing only records it; starting it is a normal plan's.
			w.forget("agent.coder")
			f.Stop(l, "agent.coder")
		}},
		{name: "unfinished", drift: func(w *workspace, f *drivertest.Fake, l string) {
			// An apply died while setting the object up: replaced, not started.
			w.forget("agent.coder")
			for _, o := range f.Objects(l) {
				if o.Addr == "agent.coder" {
					o.Running, o.Unfinished = false, true
					f.Put(l, o)
				}
			}
		}},
		{name: "never-started", drift: func(w *workspace, f *drivertest.Fake, l string) {
			// An apply died between creating the container and starting it.
			w.forget("agent.coder")
			f.Stop(l, "agent.coder")
		}},
		{name: "stopped-unrecorded", drift: func(w *workspace, f *drivertest.Fake, l string) {
			// An apply died between starting the container and recording
			// it, and the engine, killed with it and restarted, stopped it.
			w.forget("agent.coder")
			f.ExitWith(l, "agent.coder", drivers.Exit{Code: 143, At: time.Date(2026, 11, 25, 10, 14, 3, 0, time.UTC), Stopped: true})
		}},
		{name: "adopt", drift: func(w *workspace, _ *drivertest.Fake, _ string) {
			// An apply that died between creating the container and recording it.
			w.forget("agent.coder")
		}},
		{name: "target", args: []string{"-target=agent.reviewer"}},
		{name: "replace-requested", args: []string{"-replace=agent.coder"}, check: []string{}},
		{name: "refresh-false", args: []string{"-refresh=false"}, drift: func(_ *workspace, f *drivertest.Fake, l string) { f.Stop(l, "agent.coder") }},
		{name: "refresh-only", args: []string{"-refresh-only"}, drift: func(_ *workspace, f *drivertest.Fake, l string) {
			f.Remove(l, "agent.coder")
		}},
		{name: "forget", drift: func(_ *workspace, f *drivertest.Fake, l string) { f.Remove(l, "agent.reviewer") }},
		{name: "ignore-changes"},
		{name: "list-diff"},
		// The engine cannot change a healthcheck in place.
		{name: "healthcheck"},
		{name: "destroy-keeps-snapshots", args: []string{"-destroy"}, setup: fixedClock, drift: func(w *workspace, f *drivertest.Fake, l string) {
			// One snapshot taken before a replacement, of a workload that
			// wrote one file; the destroy takes another and keeps both.
			f.WriteFile(l, "agent.coder", "/workspace/notes.txt")
			w.must("apply", "-auto-approve", "-replace=agent.coder")
		}},
		{name: "forget-snapshot", setup: fixedClock, drift: func(w *workspace, f *drivertest.Fake, l string) {
			// The snapshot's image was deleted outside bottlefile: it is
			// forgotten, and the agent, which runs, is left alone.
			w.must("apply", "-auto-approve", "-replace=agent.coder")
			f.Remove(l, "agent.coder.snapshot.1")
		}},
		{name: "max-total-size", setup: fixedClock, drift: func(w *workspace, f *drivertest.Fake, l string) {
			// Three snapshots of 1000, 2000 and 3000 bytes (each resumes
			// the files of the one before, and one more is written), taken
			// before max_total_size is set.
			dir := filepath.Join("testdata", "plans", "max-total-size")
			w.writeFixture(filepath.Join(dir, "before.hcl"))
			for i := range 3 {
				f.WriteFile(l, "agent.coder", fmt.Sprintf("/workspace/%d.txt", i))
				w.must("apply", "-auto-approve", "-replace=agent.coder")
			}
			w.writeFixture(filepath.Join(dir, "after.hcl"))
		}},
		{name: "remove-agent-keeps-snapshots", setup: fixedClock, drift: removeAgentDrift},
		{name: "remove-agent-discards", setup: fixedClock, drift: removeAgentDrift},
		// An image upgrade: without a workspace the agent resumes from the
		// snapshot and the plan says the new image is not used; with one
		// the new image boots with the workspace carried over, from the
		// snapshot taken first or from the container it replaces.
		{name: "image-upgrade-resumes", setup: fixedClock, drift: writeWork},
		{name: "workspace-carry", setup: fixedClock, drift: writeWork},
		{name: "workspace-carry-replaced", drift: writeWork},
		{name: "fork"},
		{name: "migration", setup: func(w *workspace) {
			w.extra = map[string]*drivertest.Fake{"smolvm": {DriverName: "smolvm"}}
		}, drift: func(w *workspace, f *drivertest.Fake, l string) {
			// What the agent wrote moves with it.
			f.WriteFile(l, "agent.coder", "/workspace/progress.md")
		}},
		{name: "orphans", drift: func(_ *workspace, f *drivertest.Fake, l string) {
			f.Put(l, drivers.LiveObject{Addr: "agent.ghost", Kind: "container", ID: "fake-ghost", Name: "bf-ghost", Hash: "deadbeef", Running: true})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "plans", tc.name)
			w := newWorkspace(t)
			if tc.setup != nil {
				tc.setup(w)
			}
			if _, err := os.Stat(filepath.Join(dir, "before.hcl")); err == nil {
				w.writeFixture(filepath.Join(dir, "before.hcl"))
				w.must("apply", "-auto-approve")
			}
			w.writeFixture(filepath.Join(dir, "after.hcl"))
			if tc.drift != nil {
				tc.drift(w, w.fake, w.lineage())
			}
			human := w.must("plan", tc.args...)
			golden(t, filepath.Join(dir, "plan.txt"), w.normalize(human))
			asJSON := w.must("plan", append([]string{"-json"}, tc.args...)...)
			golden(t, filepath.Join(dir, "plan.json"), w.normalize(asJSON))
			if strings.Contains(human+asJSON, "s3cr3t") {
				t.Errorf("a sensitive value reached the plan output")
			}

			// A saved plan reads back as the same plan, and applies.
			planFile := filepath.Join(w.dir, "saved.plan")
			w.must("plan", append([]string{"-out=" + planFile}, tc.args...)...)
			if diff := cmp.Diff(human, w.must("show", planFile)); diff != "" {
				t.Errorf("show of the saved plan differs from plan (-plan +show):\n%s", diff)
			}
			if diff := cmp.Diff(asJSON, w.must("show", "-json", planFile)); diff != "" {
				t.Errorf("show -json of the saved plan differs from plan -json (-plan +show):\n%s", diff)
			}

			// What the plan promises, apply does: afterwards nothing is left to do.
			w.must("apply", planFile)
			check := tc.check
			if check == nil {
				check = tc.args
			}
			if got := w.must("plan", check...); !strings.Contains(got, "No changes.") {
				t.Errorf("after apply, plan still has changes:\n%s", got)
			}
		})
	}
}

// removeAgentDrift, with before.hcl applied again, takes two snapshots of
// agent.tester (before replacements, each after a file is written) and
// writes one more file, then puts back after.hcl, which removes the
// tester's block.
func removeAgentDrift(w *workspace, f *drivertest.Fake, l string) {
	dir := filepath.Join("testdata", "plans", strings.TrimPrefix(w.t.Name(), "TestPlanGolden/"))
	w.writeFixture(filepath.Join(dir, "before.hcl"))
	for i := range 2 {
		f.WriteFile(l, "agent.tester", fmt.Sprintf("/workspace/%d.txt", i))
		w.must("apply", "-auto-approve", "-replace=agent.tester")
	}
	f.WriteFile(l, "agent.tester", "/workspace/last.txt")
	w.writeFixture(filepath.Join(dir, "after.hcl"))
}

// writeWork has the agent write a file in its workspace and one outside.
func writeWork(_ *workspace, f *drivertest.Fake, l string) {
	f.WriteFile(l, "agent.coder", "/workspace/notes.md")
	f.WriteFile(l, "agent.coder", "/tmp/scratch")
}

// fixedClock makes the fake stamp the snapshots it takes a minute apart
// from a fixed time, and fixes the operation's and planner's clock the
// next day, so that plans that show when one was taken (or judge its age)
// are stable.
func fixedClock(w *workspace) {
	clock := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	w.fake.Now = func() time.Time { clock = clock.Add(time.Minute); return clock }
	old := now
	now = func() time.Time { return time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC) }
	w.t.Cleanup(func() { now = old })
}

// recreate gives a live object a new id, as re-making it would; hash, when
// not empty, is the config hash it was made with.
func recreate(f *drivertest.Fake, lineage, addr, hash string) {
	for _, o := range f.Objects(lineage) {
		if o.Addr == addr {
			o.ID = "fake-recreated"
			if hash != "" {
				o.Hash = hash
			}
			f.Put(lineage, o)
		}
	}
}

// forget removes a record from the workspace's state, as an apply cut off
// before recording an object leaves it.
func (w *workspace) forget(addr string) {
	s, err := state.Open(w.dir, state.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	defer s.Close()
	if err := s.Delete(addr); err != nil {
		w.t.Fatal(err)
	}
}
