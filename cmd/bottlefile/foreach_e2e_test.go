package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// foreachFleet is one agent block for a team: a bottle per name of %[2]s,
// each saying its name at start, with a snapshot policy that keeps a
// removed member's work.
const foreachFleet = `
variable "names" {
  type    = set(string)
  default = %[2]s
}

agent "coder" {
  for_each = var.names
  image    = %[1]q
  command  = ["sh", "-c", "echo hello $NAME; sleep 3600"]
  workdir  = "/workspace"
  env      = { NAME = each.key }

  snapshot_policy {
    before = ["replace", "destroy"]
  }
}
`

// TestE2EForEach: for_each over three names applies three bottles on the
// real engine, named apart without brackets in their engine names; status,
// exec and logs take an instance address; a fourth name plans one bottle
// more; removing one name plans exactly that bottle's removal, its work
// committed first and its snapshot kept; the others keep their containers.
func TestE2EForEach(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, foreachFleet, img, `["a", "b", "c"]`)
	r := mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	movesWant(t, "apply of three names", r.stdout, "Apply complete! Objects: 6 added, 0 changed, 0 destroyed.")

	ids := map[string]string{}
	for _, k := range []string{"a", "b", "c"} {
		addr := `agent.coder["` + k + `"]`
		list := containersWith(t, cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+lineage)
		if len(list) != 1 {
			t.Fatalf("want one container labelled %s, got %d", addr, len(list))
		}
		ids[k] = list[0].ID
		name := strings.TrimPrefix(list[0].Names[0], "/")
		if want := "bf-" + drivers.LineagePrefix(lineage) + "-coder__" + k; name != want {
			t.Errorf("%s is named %q, want %q", addr, name, want)
		}
	}
	wantNoChanges(t, dir, "plan after applying three names")

	r = mustRun(t, dir, "status", `agent.coder["b"]`)
	movesWant(t, `status agent.coder["b"]`, r.stdout, `agent.coder["b"]`)
	if strings.Contains(r.stdout, `agent.coder["a"]`) || strings.Contains(r.stdout, `agent.coder["c"]`) {
		t.Errorf(`status agent.coder["b"] shows other instances:\n%s`, r)
	}
	if r := mustRun(t, dir, "exec", `agent.coder["b"]`, "--", "sh", "-c", "echo $NAME; echo work > /workspace/f"); r.stdout != "b\n" {
		t.Errorf(`exec agent.coder["b"] says %q, want its own name`, r.stdout)
	}
	movesWant(t, `logs agent.coder["c"]`, mustRun(t, dir, "logs", `agent.coder["c"]`).stdout, "hello c")

	// A fourth name: one bottle more, in every view of the plan.
	writeBottlefile(t, dir, foreachFleet, img, `["a", "b", "c", "d"]`)
	r = mustRun(t, dir, "plan")
	movesWant(t, "plan of a fourth name", r.stdout, `# agent.coder["d"] will be created`, "Plan: 2 to add, 0 to change, 0 to destroy.")
	for _, k := range []string{"a", "b", "c"} {
		if strings.Contains(r.stdout, `# agent.coder["`+k+`"]`) {
			t.Errorf("a fourth name touches %s:\n%s", k, r)
		}
	}
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
		} `json:"resource_changes"`
	}
	js := mustRun(t, dir, "plan", "-json").stdout
	if err := json.Unmarshal([]byte(js), &plan); err != nil {
		t.Fatalf("plan -json: %v\n%s", err, js)
	}
	if !strings.Contains(js, `agent.coder[\"d\"]`) {
		t.Errorf("plan -json lacks the new instance:\n%s", js)
	}
	// Markdown escapes the quotes of the summary line's HTML.
	movesWant(t, "plan -markdown", mustRun(t, dir, "plan", "-markdown").stdout, "<code>agent.coder[&#34;d&#34;]</code> (container) will be created")

	// One name removed: exactly that bottle goes, its work committed
	// first and kept.
	writeBottlefile(t, dir, foreachFleet, img, `["a", "c"]`)
	r = mustRun(t, dir, "plan")
	movesWant(t, "plan of a removed name", r.stdout,
		`# agent.coder["b"] will be destroyed`, `# agent.coder["b"].snapshot.1 will be taken`,
		"Plan: 0 to add, 0 to change, 2 to destroy, 1 to snapshot, 0 snapshots deleted.")
	for _, k := range []string{"a", "c"} {
		if strings.Contains(r.stdout, `# agent.coder["`+k+`"]`) {
			t.Errorf("removing b touches %s:\n%s", k, r)
		}
	}
	mustRun(t, dir, "apply", "-auto-approve")
	if left := containersWith(t, cli, drivers.LabelAddress+`=agent.coder["b"]`, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf(`agent.coder["b"]'s container is left: %+v`, left)
	}
	for _, k := range []string{"a", "c"} {
		list := containersWith(t, cli, drivers.LabelAddress+`=agent.coder["`+k+`"]`, drivers.LabelLineage+"="+lineage)
		if len(list) != 1 || list[0].ID != ids[k] {
			t.Errorf("agent.coder[%q]'s container changed: %+v", k, list)
		}
	}
	movesWant(t, "snapshot list", mustRun(t, dir, "snapshot", "list").stdout, `agent.coder["b"].snapshot.1`)
	wantNoChanges(t, dir, "plan after removing a name")

	// The name back: it resumes from its kept snapshot, its file there.
	writeBottlefile(t, dir, foreachFleet, img, `["a", "b", "c"]`)
	mustRun(t, dir, "apply", "-auto-approve")
	if r := mustRun(t, dir, "exec", `agent.coder["b"]`, "--", "cat", "/workspace/f"); r.stdout != "work\n" {
		t.Errorf(`agent.coder["b"] back has /workspace/f = %q`, r.stdout)
	}
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %+v", left)
	}
}

// foreachSingle is one agent, before a team shares it.
const foreachSingle = `
agent "coder" {
  image   = %[1]q
  command = ["sleep", "3600"]
  workdir = "/workspace"
}
`

// foreachAdopted is that agent's block with for_each and a count block
// beside it, the single agent moved to the key "a".
const foreachAdopted = `
agent "coder" {
  for_each = toset(["a", "b"])
  image    = %[1]q
  command  = ["sleep", "3600"]
  workdir  = "/workspace"
}

agent "worker" {
  count   = 2
  image   = %[1]q
  command = ["sleep", "3600"]
}

moved {
  from = agent.coder
  to   = agent.coder["a"]
}
`

// TestE2EForEachAdopt: a moved block adopts a single agent into a
// for_each on the real engine: the plan moves it and creates only the new
// key; its container and files stay. Instances of count take snapshot
// take, stop and start, and state mv takes instance addresses.
func TestE2EForEachAdopt(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	writeBottlefile(t, dir, foreachSingle, img)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := snapLineage(t, cli, dir)
	mustRun(t, dir, "exec", "agent.coder", "--", "sh", "-c", "echo mine > /workspace/f")
	id := movesContainer(t, cli, lineage, "agent.coder")

	writeBottlefile(t, dir, foreachAdopted, img)
	r := mustRun(t, dir, "plan")
	movesWant(t, "plan of the adoption", r.stdout, `# agent.coder has moved to agent.coder["a"]`, `# agent.coder["b"] will be created`, `# agent.worker[1] will be created`)
	if strings.Contains(r.stdout, "destroyed") || strings.Contains(r.stdout, `# agent.coder["a"] will be created`) {
		t.Errorf("the adoption plans more than a move and new instances:\n%s", r)
	}
	mustRun(t, dir, "apply", "-auto-approve")
	if r := mustRun(t, dir, "exec", `agent.coder["a"]`, "--", "cat", "/workspace/f"); r.stdout != "mine\n" {
		t.Errorf(`agent.coder["a"] has /workspace/f = %q`, r.stdout)
	}
	if got := movesContainer(t, cli, lineage, "agent.coder"); got != id {
		t.Errorf("the adopted container is %s, was %s", got, id)
	}
	wantNoChanges(t, dir, "plan after the adoption")

	movesWant(t, "snapshot take of an instance", mustRun(t, dir, "snapshot", "take", "agent.worker[1]").stdout, "agent.worker[1].snapshot.1")
	movesWant(t, "snapshot list", mustRun(t, dir, "snapshot", "list").stdout, "agent.worker[1].snapshot.1")
	mustRun(t, dir, "stop", "agent.worker[0]")
	wantNoChanges(t, dir, "plan after stopping an instance")
	mustRun(t, dir, "start", "agent.worker[0]")

	movesWant(t, "state mv of an instance", mustRun(t, dir, "state", "mv", `agent.coder["b"]`, `agent.coder["c"]`).stdout, `Moved agent.coder["b"] to agent.coder["c"]`)
	movesWant(t, "state list", mustRun(t, dir, "state", "list").stdout, `agent.coder["c"]`+"\n", `agent.coder["c"].network`+"\n")
	mustRun(t, dir, "destroy", "-auto-approve", "-include-snapshots")
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left after destroy: %+v", left)
	}
}
