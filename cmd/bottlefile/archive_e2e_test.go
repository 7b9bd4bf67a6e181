package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/planner"
)

// archiveGone checks that nothing of agent.coder's bottle is left on the
// engine but its snapshot images: no container, no network.
func archiveGone(t *testing.T, cli *client.Client, lineage, when string) {
	t.Helper()
	if cs := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(cs) != 0 {
		var names []string
		for _, c := range cs {
			names = append(names, c.Labels[drivers.LabelAddress]+" ("+c.State+")")
		}
		t.Errorf("%s: containers of the lineage left: %v", when, names)
	}
	if ns := networksWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent.coder.network"); len(ns) != 0 {
		t.Errorf("%s: the agent's network is left", when)
	}
	imgs, err := cli.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", drivers.LabelLineage+"="+lineage))})
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) == 0 {
		t.Errorf("%s: no snapshot image of the lineage", when)
	}
}

// archivedIn is the snapshot agent.coder's record says it is archived in,
// "" when it is not archived.
func archivedIn(t *testing.T, dir string) string {
	t.Helper()
	_, recs := readState(t, dir)
	for _, r := range recs {
		if r.Addr == "agent.coder" && planner.IsArchived(&r) {
			return r.Computed[planner.ArchiveSnapshotKey]
		}
	}
	return ""
}

// archiveConfig is an agent with a sidecar and an egress gateway; %[1]s
// is the image.
const archiveConfig = `
agent "coder" {
  image   = %[1]q
  command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]

  sidecar "db" {
    image   = %[1]q
    command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  }

  egress {
    allow = ["example.com:443"]
  }
}
`

// TestE2EArchive is issue 31's archive on the real engine: an agent with
// a sidecar and a gateway writes a file; archive commits it and removes
// its containers and its network (none carrying the lineage label is
// left); plan says "No changes."; status says it is archived; exec
// resumes it from the snapshot, with the file, before running the
// command; plan says "No changes." again. Archived again, an apply that
// adds a sidecar resumes it with the file; archived a third time, a
// destroy leaves no record.
func TestE2EArchive(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, archiveConfig, img)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c", "echo kept > /tmp/notes.txt")

	r := mustRun(t, dir, "archive", "agent.coder")
	if !strings.Contains(r.stdout, "4 archived, 1 snapshot taken") {
		t.Errorf("archive:\n%s", r)
	}
	archiveGone(t, cli, lineage, "after archive")
	if got := archivedIn(t, dir); got != "agent.coder.snapshot.1" {
		t.Errorf("the record says it is archived in %q", got)
	}
	wantNoChanges(t, dir, "after archive")
	if r := mustRun(t, dir, "status"); !strings.Contains(r.stdout, "archived") {
		t.Errorf("status of the archived agent:\n%s", r)
	}

	r = mustRun(t, dir, "exec", "agent.coder", "--", "cat", "/tmp/notes.txt")
	if r.stdout != "kept\n" || !strings.Contains(r.stderr, "agent.coder is archived: resuming it first.") {
		t.Errorf("exec of the archived agent:\n%s", r)
	}
	for _, addr := range []string{"agent.coder", "agent.coder.sidecar.db", "agent.coder.gateway"} {
		cs := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
		if len(cs) != 1 || cs[0].State != "running" {
			t.Errorf("after the resume %s has %d containers", addr, len(cs))
		}
	}
	if got := archivedIn(t, dir); got != "" {
		t.Errorf("the record still says archived in %s after the resume", got)
	}
	wantNoChanges(t, dir, "after the resume")

	// Archived again; a sidecar added to it resumes it (the sidecar is
	// made on its network), with its file.
	mustRun(t, dir, "archive", "agent.coder")
	archiveGone(t, cli, lineage, "after the second archive")
	writeBottlefile(t, dir, "%s", strings.Replace(fmt.Sprintf(archiveConfig, img), "  egress {", fmt.Sprintf("  sidecar \"cache\" {\n    image   = %q\n    command = [\"sleep\", \"600\"]\n  }\n\n  egress {", img), 1))
	r = mustRun(t, dir, "apply", "-auto-approve")
	if got := archivedIn(t, dir); got != "" || !strings.Contains(r.stdout, "is resumed for a change of its configuration") {
		t.Errorf("an apply adding a sidecar to the archived agent:\n%s", r)
	}
	if r := mustRun(t, dir, "exec", "agent.coder", "--", "cat", "/tmp/notes.txt"); r.stdout != "kept\n" {
		t.Errorf("after the resume by apply:\n%s", r)
	}
	wantNoChanges(t, dir, "after the resume by apply")

	// Archived a third time, then destroyed: the records go, and so does
	// the snapshot (no snapshot_policy keeps it).
	mustRun(t, dir, "archive", "agent.coder")
	r = mustRun(t, dir, "destroy", "-auto-approve")
	if _, recs := readState(t, dir); len(recs) != 0 {
		t.Errorf("destroy of the archived agent left records:\n%s\n%v", r, recs)
	}
}

// TestE2EArchiveCrash: archive is killed with SIGKILL after each of its
// engine calls in turn (the snapshot committed and not yet recorded; one
// container removed; both; the network too). After each, the next apply
// converges with nothing lost: it removes an unrecorded snapshot, or
// finishes the archive; archive (what a tick does) then archives it, plan
// says "No changes.", and exec resumes it with the file it wrote.
func TestE2EArchiveCrash(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	c := &crashRig{t: t, cli: cli, dir: t.TempDir(), image: img}
	writeBottlefile(t, c.dir, stopStartConfig, img)
	mustRun(t, c.dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, c.dir)
	c.readState()
	mustRun(t, c.dir, "exec", "agent.coder", "--", "sh", "-c", "echo kept > /tmp/notes.txt")

	for n := 1; n <= 4; n++ {
		what := fmt.Sprintf("archive killed after %d engine calls", n)
		// Something written since the last archive, which a snapshot taken
		// before the kill may or may not hold.
		mustRun(t, c.dir, "exec", "agent.coder", "--", "sh", "-c", fmt.Sprintf("echo %d >> /tmp/notes.txt", n))
		c.crashAfter(n, "archive", "agent.coder")
		c.settle()
		r := mustRun(t, c.dir, "apply", "-auto-approve")
		t.Logf("%s: the apply after it:\n%s", what, r.stdout)
		if n >= 2 && archivedIn(t, c.dir) == "" {
			t.Errorf("%s: the apply did not finish the archive:\n%s", what, r)
		}
		mustRun(t, c.dir, "archive", "agent.coder")
		archiveGone(t, cli, lineage, what)
		wantNoChanges(t, c.dir, what)
		want := "kept\n"
		for i := 1; i <= n; i++ {
			want += fmt.Sprintf("%d\n", i)
		}
		if r := mustRun(t, c.dir, "exec", "agent.coder", "--", "cat", "/tmp/notes.txt"); r.stdout != want {
			t.Errorf("%s: after the resume the agent has %q, want %q\n%s", what, r.stdout, want, r)
		}
		wantNoChanges(t, c.dir, what+", resumed")
	}
}
