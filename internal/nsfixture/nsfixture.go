// Package nsfixture is what the real-cluster test fixtures (swarmtest's
// swarm, k8stest's cluster) share: each runs its daemons in namespaces of
// their own on one Linux machine, started at most once per test binary
// (Once), held by unshare processes that die with the test process
// (Spawn), in cgroups and a directory named by the owner's pid (Kind),
// torn down by PID (Kind.Teardown), and swept by the next start when a
// killed run left them (Kind.RemoveStale). It imports no bottlefile
// package, so neither fixture imports the other's driver.
package nsfixture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CgroupRoot is where the cgroup v1 hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// Kind names what fixtures of one kind leave on the host: a directory
// under os.TempDir() holding one directory per fixture, and cgroups (in
// any v1 hierarchy), each named by the owning test process's pid.
type Kind struct {
	Name   string // for messages: "swarmtest"
	Dir    string // the directory under os.TempDir(): "bottlefile-swarm"
	Cgroup string // the cgroups' prefix: "bottlefile-swarm-"
}

// BaseDir holds one directory per fixture, named by its owner's pid.
func (k Kind) BaseDir() string { return filepath.Join(os.TempDir(), k.Dir) }

// CgroupName is the cgroup (in every v1 hierarchy it has one in) of
// fixture id.
func (k Kind) CgroupName(id string) string { return k.Cgroup + id }

// Claim makes this process's fixture directory, BaseDir/PID, with an
// owner file holding this process's start time: RemoveStale leaves a
// fixture whose owner still runs.
func (k Kind) Claim() (id, dir string, err error) {
	id = strconv.Itoa(os.Getpid())
	dir = filepath.Join(k.BaseDir(), id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	st, err := StartTime(os.Getpid())
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(st), 0o644); err != nil {
		return "", "", err
	}
	return id, dir, nil
}

// Preflight says what this machine lacks to run a fixture: root, one of
// programs (each with the Debian package that has it), or the cgroup v1
// hierarchies.
func Preflight(programs [][2]string) error {
	if os.Geteuid() != 0 {
		return errors.New("it needs root (network, PID and mount namespaces, cgroups)")
	}
	for _, p := range programs {
		if _, err := exec.LookPath(p[0]); err != nil {
			return fmt.Errorf("%s is missing (apt-get install %s)", p[0], p[1])
		}
	}
	if _, err := os.Stat(filepath.Join(CgroupRoot, "pids", "cgroup.procs")); err != nil {
		return fmt.Errorf("it needs the cgroup v1 hierarchies (pids at %s/pids): %w", CgroupRoot, err)
	}
	return nil
}

// Poll calls try every interval until it succeeds, ctx ends, or alive
// (that the fixture's processes live) fails.
func Poll(ctx context.Context, interval time.Duration, try, alive func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		if aerr := alive(); aerr != nil {
			return aerr
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// LogTails is the last lines of each log that is not empty, for the
// error of a start that failed.
func LogTails(logs []string) string {
	var b strings.Builder
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "\n--- %s\n%s", l, strings.Join(lines[max(0, len(lines)-8):], "\n"))
	}
	return b.String()
}

// RegistryConfig configures Debian's docker-registry, which both
// fixtures run: storage under root (deletes allowed, for snapshot
// tests), listening on addr.
func RegistryConfig(root, addr string) string {
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %q
`, root, addr)
}

// StartTime is a process's start time (field 22 of /proc/PID/stat), which
// with its pid names it uniquely.
func StartTime(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return fields[19], nil
}
