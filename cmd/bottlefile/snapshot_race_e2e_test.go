package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/state"
)

// raceBottlefile declares two agents, each with two sidecars and a policy
// that snapshots it before a replace and before a destroy. %q is the
// image of all of them.
const raceBottlefile = `
agent "coder" {
  image   = %[1]q
  command = ["sleep", "3600"]
  workdir = "/workspace"

  sidecar "cache" {
    image   = %[1]q
    command = ["sleep", "3600"]
  }

  sidecar "git-gate" {
    image   = %[1]q
    command = ["sleep", "3600"]
  }

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 10
  }
}

agent "reviewer" {
  image   = %[1]q
  command = ["sleep", "3600"]
  workdir = "/workspace"

  sidecar "cache" {
    image   = %[1]q
    command = ["sleep", "3600"]
  }

  sidecar "lint" {
    image   = %[1]q
    command = ["sleep", "3600"]
  }

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 10
  }
}
`

var raceAgents = []string{"coder", "reviewer"}

// raceRoundsEnv sets how many rounds TestE2ESnapshotRace runs (default 1,
// for CI; 2 gives each side each role). Run the whole test many times
// with -count.
const raceRoundsEnv = "BOTTLEFILE_TEST_RACE_ROUNDS"

// raceSide is one Bottlefile directory (one state, one lineage) of the
// race, and the work its agents should find when they resume.
type raceSide struct {
	name    string
	dir     string
	cli     *client.Client
	lineage string
	want    map[string]string // agent -> /workspace/work.txt
	lines   int
}

// apply applies, checks that every agent resumed with all its work, and
// has each write one more line. It touches no *testing.T: goroutines run it.
func (s *raceSide) apply(what string) error {
	r, err := trustRun(s.dir, nil, "apply", "-auto-approve")
	if err != nil {
		return err
	}
	if r.code != 0 {
		return fmt.Errorf("%s: %s: apply exits %d:\n%s%s", what, s.name, r.code, trustSummary(r.stdout), r.stderr)
	}
	lineage, err := raceLineage(s.dir)
	if err != nil {
		return err
	}
	s.lineage = lineage
	s.lines++
	for _, a := range raceAgents {
		id, err := s.agentID(a)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", what, s.name, err)
		}
		got, err := raceExec(s.cli, id, "cat /workspace/work.txt 2>/dev/null")
		if err != nil {
			return fmt.Errorf("%s: %s: reading agent.%s's work: %w", what, s.name, a, err)
		}
		if got != s.want[a] {
			return fmt.Errorf("%s: %s: agent.%s lost work: /workspace/work.txt = %q, want %q (it should resume from its newest snapshot)\napply:\n%s", what, s.name, a, got, s.want[a], r.stdout)
		}
		line := fmt.Sprintf("%s line %d", a, s.lines)
		if _, err := raceExec(s.cli, id, "echo '"+line+"' >> /workspace/work.txt"); err != nil {
			return fmt.Errorf("%s: %s: writing in agent.%s: %w", what, s.name, a, err)
		}
		s.want[a] += line + "\n"
	}
	return nil
}

// destroy destroys (keeping the policy snapshots); it touches no
// *testing.T.
func (s *raceSide) destroy(what string) error {
	r, err := trustRun(s.dir, nil, "destroy", "-auto-approve")
	if err != nil {
		return err
	}
	if r.code != 0 {
		return fmt.Errorf("%s: %s: destroy exits %d, want 0:\n%s%s", what, s.name, r.code, trustSummary(r.stdout), r.stderr)
	}
	return nil
}

func (s *raceSide) agentID(agent string) (string, error) {
	f := raceFilter(drivers.LabelLineage+"="+s.lineage, drivers.LabelAddress+"=agent."+agent)
	list, err := s.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		return "", err
	}
	if len(list) != 1 || list[0].State != "running" {
		return "", fmt.Errorf("want one running container at agent.%s, got %v", agent, trustContainerNames(list))
	}
	return list[0].ID, nil
}

// check requires, on the test goroutine, that every snapshot the side's
// state records is on the engine, and (destroyed) that no container of the
// lineage is left.
func (s *raceSide) check(t *testing.T, what string, destroyed bool) {
	t.Helper()
	if s.lineage == "" {
		return
	}
	snaps := trustSnapshotRecords(t, s.dir)
	if missing := trustMissingSnapshots(t, s.cli, snaps); len(missing) != 0 {
		t.Errorf("%s: %s: recorded snapshots lost: %v", what, s.name, missing)
	}
	if !destroyed {
		return
	}
	if left := trustContainerNames(containersWith(t, s.cli, drivers.LabelLineage+"="+s.lineage)); len(left) != 0 {
		t.Errorf("%s: %s: containers left after destroy: %v", what, s.name, left)
	}
	for _, a := range raceAgents {
		if s.want[a] == "" {
			continue
		}
		found := false
		for addr := range snaps {
			found = found || strings.HasPrefix(addr, "agent."+a+".snapshot.")
		}
		if !found {
			t.Errorf("%s: %s: agent.%s has work and no snapshot is recorded after its destroy: %v", what, s.name, a, trustKeys(snaps))
		}
	}
}

// TestE2ESnapshotRace is issue 11's race test: two bottlefile processes on
// one engine, each with its own directory and so its own lineage, each
// with two agents that have sidecars and a before-destroy snapshot policy.
//
// Both sides apply at once. Then, in each round, one side destroys (taking
// its policy snapshots while deleting sidecars, and each delete sweeps
// untagged snapshot images) while the other side destroys too, applies
// (resuming from the snapshots it just took) and destroys again: commits
// and sweeps of the two processes overlap both ways. After each round
// every destroy has exited 0, no container is left, and every snapshot
// either state records is on the engine; then both sides apply at once
// and every agent resumes with all it wrote. The sides swap roles each
// round. At the end both run destroy -include-snapshots at once, which
// leaves nothing of either lineage.
//
// BOTTLEFILE_TEST_RACE_ROUNDS sets the rounds (default 1); repeat the
// whole test with -count=N.
func TestE2ESnapshotRace(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	rounds := 1
	if v := os.Getenv(raceRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", raceRoundsEnv, v)
		}
		rounds = n
	}
	sides := []*raceSide{
		{name: "side A", dir: t.TempDir(), cli: cli, want: map[string]string{}},
		{name: "side B", dir: t.TempDir(), cli: cli, want: map[string]string{}},
	}
	registered := map[string]bool{}
	register := func() {
		for _, s := range sides {
			if s.lineage == "" {
				s.lineage, _ = raceLineage(s.dir)
			}
			if s.lineage != "" && !registered[s.lineage] {
				registered[s.lineage] = true
				t.Cleanup(func() { snapRemoveImages(t, cli, s.lineage) })
				dockertest.Cleanup(t, cli, s.lineage)
			}
		}
	}
	for _, s := range sides {
		writeBottlefile(t, s.dir, raceBottlefile, img)
	}

	// both runs one function per side at once, logs when each step ran,
	// and fails the test (after both ended) if either failed.
	both := func(what string, a, b func(log func(string, time.Time)) error) {
		t.Helper()
		start := time.Now()
		var mu sync.Mutex
		var steps []string
		log := func(step string, from time.Time) {
			mu.Lock()
			defer mu.Unlock()
			steps = append(steps, fmt.Sprintf("%s %.1fs-%.1fs", step, from.Sub(start).Seconds(), time.Since(start).Seconds()))
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, f := range []func(func(string, time.Time)) error{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f(log)
			}()
		}
		wg.Wait()
		register()
		t.Logf("%s: %s", what, strings.Join(steps, "; "))
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	}
	step := func(s *raceSide, name string, f func(string) error, what string, log func(string, time.Time)) error {
		from := time.Now()
		err := f(what)
		log(s.name+" "+name, from)
		return err
	}
	apply := func(s *raceSide, what string) func(func(string, time.Time)) error {
		return func(log func(string, time.Time)) error { return step(s, "apply", s.apply, what, log) }
	}

	both("first apply", apply(sides[0], "first apply"), apply(sides[1], "first apply"))
	if t.Failed() {
		t.FailNow()
	}
	for round := 1; round <= rounds; round++ {
		x, y := sides[round%2], sides[(round+1)%2]
		what := fmt.Sprintf("round %d", round)
		both(what, func(log func(string, time.Time)) error {
			return step(x, "destroy", x.destroy, what, log)
		}, func(log func(string, time.Time)) error {
			if err := step(y, "destroy", y.destroy, what, log); err != nil {
				return err
			}
			if err := step(y, "apply", y.apply, what, log); err != nil {
				return err
			}
			return step(y, "destroy", y.destroy, what, log)
		})
		for _, s := range sides {
			s.check(t, what, true)
		}
		if t.Failed() {
			t.FailNow()
		}
		what = fmt.Sprintf("resuming after round %d", round)
		both(what, apply(x, what), apply(y, what))
		for _, s := range sides {
			s.check(t, what, false)
		}
		if t.Failed() {
			t.FailNow()
		}
	}

	purge := func(s *raceSide) func(func(string, time.Time)) error {
		return func(log func(string, time.Time)) error {
			return step(s, "destroy -include-snapshots", func(string) error {
				r, err := trustRun(s.dir, nil, "destroy", "-include-snapshots", "-auto-approve")
				if err == nil && r.code != 0 {
					err = fmt.Errorf("%s: destroy -include-snapshots exits %d:\n%s%s", s.name, r.code, trustSummary(r.stdout), r.stderr)
				}
				return err
			}, "", log)
		}
	}
	both("destroy -include-snapshots", purge(sides[0]), purge(sides[1]))
	for _, s := range sides {
		if left := trustLineageLeft(t, cli, s.lineage); len(left) != 0 {
			t.Errorf("%s: destroy -include-snapshots left objects carrying the lineage:\n  %s", s.name, strings.Join(left, "\n  "))
		}
	}
}

// raceLineage reads the lineage of the state in dir without a
// *testing.T.
func raceLineage(dir string) (string, error) {
	s, err := raceOpenState(dir)
	if err != nil {
		return "", err
	}
	defer s.Close()
	return s.Lineage(), nil
}

// raceExec runs a shell script in a running container and returns what it
// printed; it touches no *testing.T.
func raceExec(cli *client.Client, id, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"sh", "-c", script}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		return "", err
	}
	return out.String(), nil
}

func raceFilter(labels ...string) filters.Args {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	return f
}

func raceOpenState(dir string) (*state.Store, error) {
	return state.Open(dir, state.Options{ReadOnly: true})
}
