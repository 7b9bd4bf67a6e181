package smolvm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// DefaultBinary is the program looked up on PATH when a runtime block sets
// no binary.
const DefaultBinary = "smolvm"

// The supported smolvm versions are minVersion and later. Machine names
// are flags since 1.0.2, and create --from honours the egress flags since
// 1.8.0 (PR #892); before that it dropped them silently.
var minVersion = version{1, 8, 0, ""}

// newestVerified is the newest release the CLI surface was checked
// against (reference/smolvm-cli.md). Later ones are accepted, and logged.
var newestVerified = version{1, 9, 3, ""}

// installHint tells an operator how to get smolvm.
const installHint = `install it with "curl -sSL https://smolmachines.com/install.sh | bash", ` +
	`or from the apt, yum or pacman packages (docs/install-*.md in https://github.com/smol-machines/smolvm)`

// Timeouts for calls that should be quick. Start, which pulls the image,
// and create and delete are bounded only by the caller's context.
const (
	versionTimeout = 30 * time.Second
	listTimeout    = 60 * time.Second
	execTimeout    = 30 * time.Second
)

// Driver drives the smolvm CLI on this host. It is safe for concurrent
// use once configured.
type Driver struct {
	log hclog.Logger

	// Set at construction; tests replace them.
	defaultBinary string                     // looked up when the runtime block sets no binary
	newRunner     func(binary string) runner // makes the runner for a resolved binary
	readyTimeout  time.Duration              // how long readiness is retried
	readyInterval time.Duration              // first pause between readiness checks

	// mu guards the fields below, which Configure sets.
	mu      sync.RWMutex
	run     runner
	runtime string
	binary  string
	ver     version
	baseDir string // the Bottlefile's directory, for relative image paths
	// stateDir (.bottlefile, absolute) holds snapshots; "" when the core
	// gave none, and then snapshots are an error.
	stateDir string
}

var (
	_ drivers.Driver  = (*Driver)(nil)
	_ drivers.Factory = New
)

// New makes an unconfigured smolvm driver.
func New(log hclog.Logger) (drivers.Driver, error) {
	return newDriver(log, func(binary string) runner { return execRunner{binary: binary} }), nil
}

func newDriver(log hclog.Logger, newRunner func(binary string) runner) *Driver {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Driver{
		log:           log.Named("smolvm"),
		defaultBinary: DefaultBinary,
		newRunner:     newRunner,
		readyTimeout:  60 * time.Second,
		readyInterval: 250 * time.Millisecond,
	}
}

// Name is the driver attribute value of a smolvm runtime block.
func (d *Driver) Name() string { return "smolvm" }

// Declare is what a smolvm runtime block holds and what the smolvm
// driver can do. It runs no CLI.
func (d *Driver) Declare() drivers.Declaration {
	return Declaration()
}

// Declaration is the smolvm driver's declaration, without a driver.
//
// A sidecar would be a second microVM, and bottlefile cannot give the
// agent access to it by name (smolvm's named inter-VM networks need 1.8.3
// and are not documented to resolve machines by name, and the agent's
// allowlist is fixed at create, before the sidecar has an address).
// Images come from a registry, a docker-save tar or a .smolmachine: there
// is no build. A machine has no user setting. smolvm allows destinations
// (named hosts and address blocks), not ports or name patterns. No
// attribute changes in place: "machine update" needs a stopped machine
// and cannot change the image, workload or labels, so every change
// replaces the machine.
func Declaration() drivers.Declaration {
	return drivers.Declaration{
		Schema: drivers.Schema{Runtime: hcldec.ObjectSpec{
			"binary": &hcldec.AttrSpec{Name: "binary", Type: cty.String},
		}},
		Capabilities: drivers.Capabilities{
			// No user (the machine runs its command as root) and no
			// pids (smolvm has no such limit).
			Attributes: []string{"image", "command", "entrypoint", "env", "workdir", "cpus", "memory", "labels"},
			Egress:     drivers.EgressCapabilities{Names: true, Addresses: true, CIDRs: true},
			Snapshots:  drivers.SnapshotCapabilities{Take: true, Format: drivers.FormatSmolvmPack, Import: true},
			Exec:       true,
		},
	}
}

// Configure finds the smolvm binary and checks its version. It runs
// "smolvm --version" and nothing else.
func (d *Driver) Configure(ctx context.Context, req drivers.ConfigureRequest) error {
	want, err := drivers.ConfigString(req.Config, "binary")
	if err != nil {
		return fmt.Errorf("runtime %q: binary: %w", req.Runtime, err)
	}
	binary, err := d.resolveBinary(want, req.Runtime)
	if err != nil {
		return err
	}
	run := d.newRunner(binary)

	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	out, err := run.run(vctx, []string{"--version"}, nil)
	if err != nil {
		return fmt.Errorf("checking the smolvm version (%s --version): %w", binary, err)
	}
	v, err := parseVersion(string(out))
	if err != nil {
		return fmt.Errorf("%s --version: %w; bottlefile needs smolvm %s or later", binary, err, minVersion)
	}
	if v.Less(minVersion) {
		return fmt.Errorf("smolvm %s is not supported: bottlefile needs smolvm %s or later "+
			"(machine names are flags since 1.0.2; create --from honours egress flags since 1.8.0); "+
			"upgrade %s: %s", v, minVersion, binary, installHint)
	}
	if newestVerified.Less(v) {
		d.log.Info("smolvm is newer than the newest release bottlefile was verified against", "version", v.String(), "verified", newestVerified.String())
	}

	baseDir, stateDir := "", ""
	if req.StateDir != "" {
		if stateDir, err = filepath.Abs(req.StateDir); err != nil {
			return fmt.Errorf("runtime %q: the state directory: %w", req.Runtime, err)
		}
		baseDir = filepath.Dir(stateDir)
	}
	d.mu.Lock()
	d.run, d.runtime, d.binary, d.ver, d.baseDir, d.stateDir = run, req.Runtime, binary, v, baseDir, stateDir
	d.mu.Unlock()
	d.log.Debug("configured", "runtime", req.Runtime, "binary", binary, "version", v.String())
	return nil
}

// resolveBinary finds the program: a path is checked as it is, a bare
// name is looked up on PATH.
func (d *Driver) resolveBinary(want, runtime string) (string, error) {
	if want == "" {
		path, err := exec.LookPath(d.defaultBinary)
		if err != nil {
			return "", fmt.Errorf("smolvm was not found on PATH (runtime %q): %s, or set binary in the runtime block to its path", runtime, installHint)
		}
		return path, nil
	}
	if !strings.ContainsRune(want, os.PathSeparator) && !strings.ContainsRune(want, '/') {
		path, err := exec.LookPath(want)
		if err != nil {
			return "", fmt.Errorf("the smolvm binary %q (binary in runtime %q) was not found on PATH: %s", want, runtime, installHint)
		}
		return path, nil
	}
	info, err := os.Stat(want)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("the smolvm binary %s (binary in runtime %q) does not exist: %s", want, runtime, installHint)
	case err != nil:
		return "", fmt.Errorf("the smolvm binary %s (binary in runtime %q): %w", want, runtime, err)
	case info.IsDir():
		return "", fmt.Errorf("the smolvm binary %s (binary in runtime %q) is a directory, not the smolvm program", want, runtime)
	}
	return want, nil
}

// cli returns the runner and binary, or an error before Configure.
func (d *Driver) cli() (runner, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.run == nil {
		return nil, errors.New("smolvm driver is not configured")
	}
	return d.run, nil
}

func (d *Driver) imageBase() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.baseDir
}

// version is a smolvm release number.
type version struct {
	Major, Minor, Patch int
	Pre                 string // pre-release suffix without its "-", e.g. "rc1"
}

func (v version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// Less orders versions as semver does: a pre-release comes before its
// release.
func (v version) Less(o version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	if v.Patch != o.Patch {
		return v.Patch < o.Patch
	}
	switch {
	case v.Pre == o.Pre:
		return false
	case v.Pre == "":
		return false
	case o.Pre == "":
		return true
	}
	return v.Pre < o.Pre
}

var versionLine = regexp.MustCompile(`^smolvm\s+v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?(?:\s|$)`)

// parseVersion reads the output of "smolvm --version" ("smolvm 1.9.3").
func parseVersion(out string) (version, error) {
	line := strings.TrimSpace(out)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	m := versionLine.FindStringSubmatch(line)
	if m == nil {
		shown := line
		if len(shown) > 80 {
			shown = shown[:80] + "..."
		}
		return version{}, fmt.Errorf("cannot read a version from %q (want \"smolvm X.Y.Z\")", shown)
	}
	var v version
	var err error
	for i, p := range []*int{&v.Major, &v.Minor, &v.Patch} {
		if *p, err = strconv.Atoi(m[i+1]); err != nil {
			return version{}, fmt.Errorf("cannot read a version from %q: %w", line, err)
		}
	}
	v.Pre = m[4]
	return v, nil
}
