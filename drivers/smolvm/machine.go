package smolvm

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

// machineSpec is a machine object's attributes, decoded: the workload
// (its Egress is the allowlist: nil means no egress block, and so no
// network at all), and what smolvm's flags take of it.
type machineSpec struct {
	drivers.Workload
	image    string // --image: a registry reference or a docker-save tar
	from     string // --from: a .smolmachine pack
	workload []string
	env      []envVar // sorted by key
	cpus     int      // 0: smolvm's default
	memMiB   int64    // 0: smolvm's default
}

// envVar is one environment variable; secret ones never go on a command
// line.
type envVar struct {
	key, value string
	secret     bool
}

// decodeMachine reads a machine object's attributes. Values that are
// still unknown, or of the wrong type, are errors naming the attribute.
// Sensitive values are unmarked here and never logged.
func decodeMachine(o drivers.Object, baseDir string) (machineSpec, error) {
	var s machineSpec
	wrap := func(name string, err error) error { return fmt.Errorf("%s: %w", name, err) }

	var err error
	if s.Workload, err = drivers.DecodeWorkload(drivers.ObjectAttrs(o)); err != nil {
		return s, err
	}
	w := s.Workload
	if s.image, s.from, err = imageSource(w.Image, baseDir); err != nil {
		return s, wrap("image", err)
	}
	// smolvm has no entrypoint flag: the workload after "--" replaces the
	// image's ENTRYPOINT and CMD together.
	s.workload = append(append([]string{}, w.Entrypoint...), w.Command...)

	if s.env, err = decodeEnv(o.Attr("env")); err != nil { // again, for which values are secret
		return s, wrap("env", err)
	}
	if s.cpus, err = cpuCount(w.CPUs); err != nil {
		return s, err
	}
	if s.memMiB, err = memoryMiB(w.Memory); err != nil {
		return s, err
	}
	for k, v := range s.Labels {
		if err := checkKey("labels", k, v, true); err != nil {
			return s, err
		}
	}
	return s, nil
}

// decodeEnv reads the env map, noting which values are sensitive: all of
// them when the map itself is marked, else the marked elements.
func decodeEnv(v cty.Value) ([]envVar, error) {
	inner, marks := v.Unmark()
	if _, err := drivers.StringMap(v); err != nil {
		return nil, err
	}
	if inner.IsNull() {
		return nil, nil
	}
	var out []envVar
	for it := inner.ElementIterator(); it.Next(); {
		k, e := it.Element()
		key, _ := k.Unmark()
		val, _ := e.UnmarkDeep()
		ev := envVar{key: key.AsString(), value: val.AsString(), secret: len(marks) > 0 || e.ContainsMarked()}
		if err := checkKey("env", ev.key, ev.value, false); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// imageSource decides how create names the image: --from for a
// .smolmachine pack, --image for anything else. Local paths (smolvm's
// rule: starting with /, ./ or ../, or ending in .tar, .tar.gz or .tgz)
// that are relative are taken from baseDir, the Bottlefile's directory.
func imageSource(ref, baseDir string) (image, from string, err error) {
	switch {
	case strings.TrimSpace(ref) == "":
		return "", "", fmt.Errorf("is empty")
	case ref == "-":
		return "", "", fmt.Errorf(`"-" (an image read from standard input) is not supported; save the image to a tar and name the file`)
	case strings.ContainsRune(ref, 0):
		return "", "", fmt.Errorf("contains a NUL byte")
	case strings.HasSuffix(ref, ".smolmachine"):
		return "", localPath(ref, baseDir), nil
	case isLocalImage(ref):
		return localPath(ref, baseDir), "", nil
	}
	return ref, "", nil
}

func isLocalImage(ref string) bool {
	return strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") ||
		strings.HasSuffix(ref, ".tar") || strings.HasSuffix(ref, ".tar.gz") || strings.HasSuffix(ref, ".tgz")
}

func localPath(p, baseDir string) string {
	if filepath.IsAbs(p) || baseDir == "" {
		return p
	}
	return filepath.Join(baseDir, p)
}

// createArgs is the "machine create" invocation for a machine, and the
// environment entries that carry its secret env values to smolvm (which
// reads them for each "-e KEY" with no value).
func createArgs(name string, s machineSpec, req drivers.ApplyRequest, warn func(msg string, args ...any)) (args, env []string, err error) {
	args = []string{"machine", "create", "--name", name}
	if s.from != "" {
		args = append(args, "--from", s.from)
	} else {
		args = append(args, "--image", s.image)
	}
	if s.cpus > 0 {
		args = append(args, "--cpus", strconv.Itoa(s.cpus))
	}
	if s.memMiB > 0 {
		args = append(args, "--mem", strconv.FormatInt(s.memMiB, 10))
	}
	envFlags, env := envArgs(s.env, warn)
	args = append(args, envFlags...)
	if s.Workdir != "" {
		args = append(args, "-w", s.Workdir)
	}
	egress, err := egressArgs(s.Egress)
	if err != nil {
		return nil, nil, err
	}
	args = append(args, egress...)
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--label", k+"="+s.Labels[k])
	}
	args = append(args,
		"--label", drivers.LabelLineage+"="+req.Lineage,
		"--label", drivers.LabelAddress+"="+req.Object.Addr,
		"--label", drivers.LabelConfigHash+"="+req.Hash,
	)
	if req.Runtime != "" {
		args = append(args, "--label", drivers.LabelRuntime+"="+req.Runtime)
	}
	if len(s.workload) > 0 {
		args = append(args, "--")
		args = append(args, s.workload...)
	}
	return args, env, nil
}

// envArgs are the -e flags for env, and the environment entries that carry
// the secret values to smolvm (which reads them for each "-e KEY" with no
// value), so that they are never on a command line.
func envArgs(vars []envVar, warn func(msg string, args ...any)) (args, env []string) {
	for _, e := range vars {
		switch {
		case !e.secret:
			args = append(args, "-e", e.key+"="+e.value)
		case hostSensitiveEnv(e.key):
			// Setting this in smolvm's own environment would change how
			// smolvm itself runs (where its database is, which libraries
			// it loads), so it has to go on the command line.
			warn("a sensitive env value goes on the smolvm command line, where other users of this host can see it, because its name would change how smolvm itself runs", "key", e.key)
			args = append(args, "-e", e.key+"="+e.value)
		default:
			args = append(args, "-e", e.key)
			env = append(env, e.key+"="+e.value)
		}
	}
	return args, env
}

// hostSensitiveEnv names variables that change how the smolvm process
// itself behaves, which must not be set in its environment.
func hostSensitiveEnv(key string) bool {
	switch strings.ToUpper(key) {
	case "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "PWD",
		"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSH_AUTH_SOCK":
		return true
	}
	for _, p := range []string{"LD_", "DYLD_", "SMOLVM_", "RUST_", "XDG_", "KRUN", "FAKESMOLVM_"} {
		if strings.HasPrefix(strings.ToUpper(key), p) {
			return true
		}
	}
	return false
}
