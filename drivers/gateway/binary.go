package gateway

import (
	"archive/tar"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

// Binary is the binary the gateways run (a runtime block's
// gateway_binary, else DefaultBinary) and its SHA-256: what a gateway
// image is made of and what a plan shows as the gateway's version.
// Reading it only reads the file.
type Binary struct {
	Path string // symlinks resolved
	Sum  string // hex SHA-256
}

// CompanionName is the file name of the gateway alone
// (cmd/bottlefile-gateway), which make build puts beside bottlefile.
const CompanionName = "bottlefile-gateway"

// ReadBinary resolves and hashes the gateway binary at path; ""
// is DefaultBinary. The error says which file could not be read.
func ReadBinary(path string) (Binary, error) {
	if path == "" {
		exe, err := DefaultBinary()
		if err != nil {
			return Binary{}, err
		}
		path = exe
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	f, err := os.Open(path)
	if err != nil {
		return Binary{Path: path}, fmt.Errorf("reading the gateway binary: %w", err)
	}
	defer f.Close()
	key, keyed := "", false
	var changed time.Time
	if fi, err := f.Stat(); err == nil {
		key, changed, keyed = statKey(path, fi)
	}
	if keyed {
		if sum, ok := cachedSum(key); ok {
			return Binary{Path: path, Sum: sum}, nil
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Binary{Path: path}, fmt.Errorf("reading the gateway binary %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	// Kept only when the file did not change while it was read, and last
	// changed a while ago: the kernel's file times are coarse (a clock
	// tick), so a write within the tick of the last would keep its times.
	if keyed && time.Since(changed) > sumSettled {
		if fi, err := f.Stat(); err == nil {
			if after, _, ok := statKey(path, fi); ok && after == key {
				storeSum(key, sum)
			}
		}
	}
	return Binary{Path: path, Sum: sum}, nil
}

// DefaultBinary is the gateway binary when no gateway_binary is set:
// CompanionName beside the running executable when it is from the same
// build, else the running executable itself ("bottlefile gateway"). The
// companion's image is a tenth of the size, and importing the image is
// most of a first gateway's start (issue 28). One from another build (a
// go install of bottlefile alone) is passed over when the build
// information tells them apart: another module version, Go version or
// recorded commit. Two builds of one checkout without version control
// stamping cannot be told apart; make build builds both at once.
func DefaultBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the running bottlefile binary for the egress gateway: %w (set gateway_binary in the runtime block)", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return gatewayOf(exe), nil
}

// gatewayOf is the gateway binary for the bottlefile executable exe: its
// companion when that is from the same build, else exe.
func gatewayOf(exe string) string {
	companion := filepath.Join(filepath.Dir(exe), CompanionName)
	if exe != companion && sameBuild(exe, companion) {
		return companion
	}
	return exe
}

// sameBuild says whether the Go binaries at a and b were built from the
// same module version and checkout (revision, time and whether it had
// changes): what a build of both with one command gives them.
func sameBuild(a, b string) bool {
	ia, err := buildinfo.ReadFile(a)
	if err != nil {
		return false
	}
	ib, err := buildinfo.ReadFile(b)
	if err != nil {
		return false
	}
	if ia.Main.Path != ib.Main.Path || ia.Main.Version != ib.Main.Version || ia.GoVersion != ib.GoVersion {
		return false
	}
	vcs := func(info *buildinfo.BuildInfo) map[string]string {
		m := map[string]string{}
		for _, s := range info.Settings {
			if strings.HasPrefix(s.Key, "vcs") {
				m[s.Key] = s.Value
			}
		}
		return m
	}
	return maps.Equal(vcs(ia), vcs(ib))
}

// The SHA-256 of a binary is kept in the user's cache directory, keyed by
// the file's path, device, inode, size, modification and change times:
// hashing the ~90 MB bottlefile binary took 90-260 ms of every plan of an
// agent with egress (most of a no-op plan's own time, issue 28). Any write
// to the file, or a new file at the path, changes the change time or the
// inode, which the kernel sets and no user can set back, so a changed
// binary is hashed again. A cache that cannot be read or written only
// costs the hash.

// sumSettled is how long ago a binary must have last changed for its sum
// to be kept (a variable for tests).
var sumSettled = 2 * time.Second

// sumCacheDir is where the sums are kept (a variable for tests).
var sumCacheDir = func() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "bottlefile", "binary-sums"), nil
}

// sumFile is the file that holds the sum for key.
func sumFile(key string) (string, bool) {
	dir, err := sumCacheDir()
	if err != nil || dir == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(key))
	return filepath.Join(dir, hex.EncodeToString(h[:16])), true
}

// cachedSum is the sum stored for key, when it is there and well formed.
func cachedSum(key string) (string, bool) {
	name, ok := sumFile(key)
	if !ok {
		return "", false
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return "", false
	}
	k, sum, ok := strings.Cut(strings.TrimSpace(string(data)), "\n")
	if !ok || k != key || len(sum) != 2*sha256.Size {
		return "", false
	}
	if _, err := hex.DecodeString(sum); err != nil {
		return "", false
	}
	return sum, true
}

// storeSum keeps sum for key; failures are ignored.
func storeSum(key, sum string) {
	name, ok := sumFile(key)
	if !ok {
		return
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".sum-*")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(key + "\n" + sum + "\n")
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		os.Remove(tmp.Name())
	}
}

// Version is what a plan shows of the gateway binary, in place of its
// SHA-256: the version Go recorded in it and the start of the hash,
// "v0.2.0 (3f2a9c1d4e5f)", or for a build from a checkout "devel
// 43fde4a1b2c3-dirty (3f2a9c1d4e5f)". The hash keeps it changing with the
// binary, so a new binary still replaces the gateways.
func (b Binary) Version() string {
	key := b.Path + "\x00" + b.Sum
	if v, ok := versions.Load(key); ok {
		return v.(string)
	}
	sum := b.Sum
	if len(sum) > 12 {
		sum = sum[:12]
	}
	v := binaryVersion(b.Path) + " (" + sum + ")"
	versions.Store(key, v)
	return v
}

// versions caches Version: a plan asks once per gateway.
var versions sync.Map

// binaryVersion reads the version of the Go binary at path from its build
// information, without running it (it may be built for another platform).
func binaryVersion(path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown version"
	}
	v := info.Main.Version
	if v != "" && v != "(devel)" && !strings.HasPrefix(v, "v0.0.0-") {
		return v
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel " + rev
}

// ImageRef is the reference of the gateway image of this binary:
// ImageRepo tagged with its SHA-256.
func (b Binary) ImageRef() string { return ImageRepo + ":" + b.Sum }

// ImageChanges are the Dockerfile instructions a gateway image is
// imported with: it runs the binary's gateway command as User, labelled
// ImageLabel and with the binary's SHA-256.
func (b Binary) ImageChanges() []string {
	return []string{
		`ENTRYPOINT ["/bottlefile"]`,
		`CMD ["gateway"]`,
		"USER " + User,
		fmt.Sprintf("LABEL %s=1 %sgateway-binary=%s", ImageLabel, drivers.LabelPrefix, b.Sum),
	}
}

// Check checks that the binary can run as PID 1 of a FROM scratch
// container: a Linux ELF executable with no program interpreter
// (statically linked). It returns the machine it is built for.
func (b Binary) Check() (elf.Machine, error) {
	f, err := elf.Open(b.Path)
	if err != nil {
		return elf.EM_NONE, fmt.Errorf("the gateway binary %s is not a Linux executable (%v): the gateway runs bottlefile inside a FROM scratch container; set gateway_binary in the runtime block to a static Linux build (CGO_ENABLED=0 GOOS=linux go build ./cmd/bottlefile)", b.Path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return elf.EM_NONE, fmt.Errorf("the gateway binary %s is not an executable", b.Path)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return elf.EM_NONE, fmt.Errorf("the gateway binary %s is dynamically linked, and the gateway runs it in a FROM scratch container: build bottlefile with CGO_ENABLED=0, as make build does (or set gateway_binary to such a build)", b.Path)
		}
	}
	return f.Machine, nil
}

// CheckMachine refuses a binary built for another machine than an engine
// whose architecture (as the engine's info says it: "x86_64", "aarch64")
// is arch. An architecture this check does not know passes.
func CheckMachine(path string, machine elf.Machine, arch string) error {
	if want := engineMachine(arch); want != elf.EM_NONE && want != machine {
		return fmt.Errorf("the gateway binary %s is built for %s, but the engine runs on %s; set gateway_binary to a static bottlefile built for the engine (CGO_ENABLED=0 GOOS=linux GOARCH=...)", path, machine, arch)
	}
	return nil
}

// engineMachine maps the engine's architecture to an ELF machine, or
// EM_NONE when it is not one this check knows.
func engineMachine(arch string) elf.Machine {
	switch arch {
	case "x86_64", "amd64":
		return elf.EM_X86_64
	case "aarch64", "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// WriteRootfs writes the gateway image's root file system as a tar: the
// binary (size bytes of bin) as /bottlefile, an /etc/passwd and
// /etc/group naming the unprivileged user it runs as, the empty RulesDir
// and a /tmp its user may write.
func WriteRootfs(w io.Writer, bin io.Reader, size int64) error {
	tw := tar.NewWriter(w)
	now := time.Now().Truncate(time.Second)
	for _, dir := range []string{"etc/", "etc/bottlefile/", "tmp/"} {
		mode := int64(0o755)
		if dir == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: mode, ModTime: now}); err != nil {
			return err
		}
	}
	files := []struct {
		name string
		data string
	}{
		{"etc/passwd", "root:x:0:0:root:/:/bottlefile\nnobody:x:65534:65534:nobody:/:/bottlefile\n"},
		{"etc/group", "root:x:0:\nnogroup:x:65534:\n"},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, f.data); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bottlefile", Mode: 0o755, Size: size, ModTime: now}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, bin, size); err != nil {
		return err
	}
	return tw.Close()
}
