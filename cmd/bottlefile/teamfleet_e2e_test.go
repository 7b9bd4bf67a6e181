package main

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/state/pgtest"
)

// teamFleet is issue 30's fleet as an operator writes it: the state in
// PostgreSQL, one block for the team by for_each, each bottle with a
// sidecar, an egress allowlist, the team's key as a sensitive variable in
// its env, and a policy that keeps a member's work when their bottle goes.
// %[1]s is the image, %[2]s the members.
const teamFleet = `
backend "pg" {
  name = "team"
}

variable "api_key" {
  type      = string
  sensitive = true
}

variable "members" {
  type    = set(string)
  default = %[2]s
}

agent "coder" {
  for_each = var.members
  image    = %[1]q
  command  = ["sleep", "3600"]
  workdir  = "/workspace"
  env      = { MEMBER = each.key, API_KEY = var.api_key }

  sidecar "cache" {
    image   = %[1]q
    command = ["sleep", "3600"]
  }

  egress {
    allow = ["api.example.com:443"]
  }

  snapshot_policy {
    before = ["replace", "destroy"]
  }
}
`

// TestE2ETeamFleet (issue 30, the combination): two colleagues' working
// directories share one PostgreSQL state. One applies the fleet; the
// other's plan says "No changes."; a stop from the second is no drift for
// the first, and a start from the first brings the files back; a member
// removed from the set takes exactly their bottle, their work kept; a
// destroy from one directory and an apply from the other resume it; the
// key is in no state document; -include-snapshots leaves nothing.
func TestE2ETeamFleet(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	srv := pgtest.Start(t)
	img := dockertest.BusyboxImage(t, cli)
	const key = "sk-team-fleet-0123456789"
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		setDirEnv(t, dir, "BOTTLEFILE_PG_CONN_STR="+srv.ConnStr, "BOTTLEFILE_VAR_api_key="+key)
		writeBottlefile(t, dir, teamFleet, img, `["alice", "bob", "carol"]`)
	}
	r := mustRun(t, a, "apply", "-auto-approve")
	movesWant(t, "apply of three members", r.stdout, "Apply complete!")
	alice := containersWith(t, cli, drivers.LabelAddress+`=agent.coder["alice"]`)
	if len(alice) != 1 {
		t.Fatalf(`want one container of agent.coder["alice"], got %d`, len(alice))
	}
	lineage := alice[0].Labels[drivers.LabelLineage]
	dockertest.Cleanup(t, cli, lineage)
	for _, m := range []string{"alice", "bob", "carol"} {
		for _, addr := range []string{`agent.coder["` + m + `"]`, `agent.coder["` + m + `"].sidecar.cache`, `agent.coder["` + m + `"].gateway`} {
			if n := len(containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)); n != 1 {
				t.Errorf("%d containers of %s, want 1", n, addr)
			}
		}
	}
	if r := mustRun(t, a, "exec", `agent.coder["alice"]`, "--", "sh", "-c", "echo $MEMBER; echo alice-work > /workspace/f"); r.stdout != "alice\n" {
		t.Errorf(`exec agent.coder["alice"] says %q`, r.stdout)
	}
	wantNoChanges(t, b, "the other directory, on the shared state")

	// A stop from one directory is recorded for both.
	mustRun(t, b, "stop", `agent.coder["alice"]`)
	for _, addr := range []string{`agent.coder["alice"]`, `agent.coder["alice"].sidecar.cache`} {
		if running := runningOf(t, cli, addr, lineage); running {
			t.Errorf("%s runs after stop", addr)
		}
	}
	wantNoChanges(t, a, "after a stop from the other directory")
	mustRun(t, a, "start", `agent.coder["alice"]`)
	if r := mustRun(t, a, "exec", `agent.coder["alice"]`, "--", "cat", "/workspace/f"); r.stdout != "alice-work\n" {
		t.Errorf("after start /workspace/f = %q", r.stdout)
	}
	wantNoChanges(t, b, "after a start from the first directory")

	// Bob leaves the team: exactly his bottle goes, his work kept.
	for _, dir := range []string{a, b} {
		writeBottlefile(t, dir, teamFleet, img, `["alice", "carol"]`)
	}
	r = mustRun(t, b, "plan")
	movesWant(t, "plan without bob", r.stdout, `# agent.coder["bob"] will be destroyed`, `# agent.coder["bob"].snapshot.1 will be taken`,
		`agent.coder["bob"] is no longer an instance of agent.coder`)
	for _, m := range []string{"alice", "carol"} {
		if strings.Contains(r.stdout, `# agent.coder["`+m+`"]`) {
			t.Errorf("bob leaving touches %s:\n%s", m, r)
		}
	}
	mustRun(t, b, "apply", "-auto-approve")
	wantNoChanges(t, a, "after bob left, from the first directory")
	movesWant(t, "snapshot list", mustRun(t, a, "snapshot", "list").stdout, `agent.coder["bob"].snapshot.1`)

	// Destroyed from one directory, applied from the other: alice resumes
	// with her file.
	mustRun(t, a, "destroy", "-auto-approve")
	mustRun(t, b, "apply", "-auto-approve")
	if r := mustRun(t, b, "exec", `agent.coder["alice"]`, "--", "cat", "/workspace/f"); r.stdout != "alice-work\n" {
		t.Errorf("after destroy and apply /workspace/f = %q", r.stdout)
	}
	for _, dir := range []string{a, b} {
		if doc := mustRun(t, dir, "state", "pull").stdout; strings.Contains(doc, key) {
			t.Errorf("the state holds the sensitive key")
		}
	}
	mustRun(t, b, "destroy", "-auto-approve", "-include-snapshots")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("%d containers of the lineage left after destroy -include-snapshots", len(left))
	}
	if left := networksWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("%d networks of the lineage left after destroy -include-snapshots", len(left))
	}
}

// runningOf reports whether the container at addr of lineage runs.
func runningOf(t *testing.T, cli *client.Client, addr, lineage string) bool {
	t.Helper()
	list := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
	if len(list) != 1 {
		t.Fatalf("%d containers of %s, want 1", len(list), addr)
	}
	info, err := cli.ContainerInspect(context.Background(), list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Running
}
