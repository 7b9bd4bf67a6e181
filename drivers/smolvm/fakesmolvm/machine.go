package main

import (
	"archive/tar"
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

var createSpec = cmdSpec{
	usage: "smolvm machine create [OPTIONS] [-- <WORKLOAD>...]",
	flags: []flagSpec{
		{long: "name", short: 'n', value: "NAME"},
		{long: "label", value: "KEY=VALUE", multi: true},
		{long: "image", short: 'I', value: "IMAGE"},
		{long: "smolfile", short: 's', value: "PATH"},
		{long: "from", value: "PATH"},
		{long: "max-image-size", value: "SIZE"},
		{long: "cpus", value: "N"},
		{long: "mem", value: "MiB"},
		{long: "storage", value: "GiB"},
		{long: "overlay", value: "GiB"},
		{long: "gpu"},
		{long: "gpu-vram", value: "MiB"},
		{long: "rosetta"},
		{long: "cuda"},
		{long: "auto-graph"},
		{long: "volume", short: 'v', value: "HOST:GUEST[:ro]", multi: true},
		{long: "port", short: 'p', value: "HOST:GUEST", multi: true},
		{long: "net"},
		{long: "net-backend", value: "BACKEND"},
		{long: "dns", value: "IPv4"},
		{long: "network", value: "NAME"},
		{long: "allow-cidr", value: "CIDR", multi: true},
		{long: "allow-host", value: "HOSTNAME", multi: true},
		{long: "outbound-localhost-only"},
		{long: "env", short: 'e', value: "KEY=VALUE", multi: true},
		{long: "workdir", short: 'w', value: "DIR"},
		{long: "init", value: "CMD", multi: true},
		{long: "ssh-agent"},
		{long: "docker-socket"},
		{long: "secret-env", value: "GUEST=HOSTVAR", multi: true},
		{long: "secret-file", value: "GUEST=PATH", multi: true},
		{long: "expose-socket", value: "GUEST[:HOST]", multi: true},
		{long: "mount-socket", value: "HOST:GUEST", multi: true},
	},
	trailing: "WORKLOAD",
}

var startSpec = cmdSpec{
	usage: "smolvm machine start [OPTIONS]",
	flags: []flagSpec{
		{long: "name", short: 'n', value: "NAME"},
		{long: "forkable"},
		{long: "fork-pool-size", value: "N"},
		{long: "cuda-vram-limit-mib", value: "MIB"},
		{long: "proxy", value: "URL"},
		{long: "no-proxy", value: "LIST"},
	},
}

var stopSpec = cmdSpec{
	usage: "smolvm machine stop [OPTIONS]",
	flags: []flagSpec{{long: "name", short: 'n', value: "NAME"}},
}

var deleteSpec = cmdSpec{
	usage: "smolvm machine delete [OPTIONS] --name <NAME>",
	flags: []flagSpec{
		{long: "name", short: 'n', value: "NAME"},
		{long: "force", short: 'f'},
		{long: "cascade"},
	},
	required: []string{"name"},
}

// execSpec has no short form for --name, as the real exec has none.
var execSpec = cmdSpec{
	usage: "smolvm machine exec [OPTIONS] -- <COMMAND>...",
	flags: []flagSpec{
		{long: "name", value: "NAME"},
		{long: "workdir", short: 'w', value: "DIR"},
		{long: "env", short: 'e', value: "KEY=VALUE", multi: true},
		{long: "secret-env", value: "GUEST=HOSTVAR", multi: true},
		{long: "secret-file", value: "GUEST=PATH", multi: true},
		{long: "timeout", value: "DURATION"},
		{long: "interactive", short: 'i'},
		{long: "tty", short: 't'},
		{long: "stream"},
		{long: "detach", short: 'd'},
	},
	trailing:         "COMMAND",
	trailingRequired: true,
}

// updateSpec is the part of "machine update" the fake implements: env and
// workdir.
var updateSpec = cmdSpec{
	usage: "smolvm machine update [OPTIONS] --name <NAME>",
	flags: []flagSpec{
		{long: "name", short: 'n', value: "NAME"},
		{long: "env", short: 'e', value: "KEY=VALUE", multi: true},
		{long: "remove-env", value: "KEY", multi: true},
		{long: "workdir", short: 'w', value: "DIR"},
	},
	required: []string{"name"},
}

var lsSpec = cmdSpec{
	usage: "smolvm machine ls [OPTIONS]",
	flags: []flagSpec{{long: "verbose", short: 'v'}, {long: "json"}},
}

var statusSpec = cmdSpec{
	usage: "smolvm machine status [OPTIONS]",
	flags: []flagSpec{{long: "name", short: 'n', value: "NAME"}, {long: "json"}},
}

// validateName applies the real CLI's machine name rules.
func validateName(name string) string {
	switch {
	case name == "":
		return "name must not be empty"
	case len(name) > 128:
		return fmt.Sprintf("name is %d characters long; the limit is 128", len(name))
	case !isAlnum(name[0]):
		return "name must start with a letter or digit"
	case strings.HasSuffix(name, "-"):
		return "name must not end with a hyphen"
	case strings.Contains(name, "--"):
		return "name must not contain '--'"
	}
	for i := 0; i < len(name); i++ {
		if !isAlnum(name[i]) && name[i] != '-' && name[i] != '_' {
			return fmt.Sprintf("name contains %q; use letters, digits, '-' and '_'", name[i])
		}
	}
	return ""
}

func isAlnum(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

// isLocalImage is the real CLI's test for an image argument that names a
// file or directory rather than a registry reference.
func isLocalImage(ref string) bool {
	return strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") ||
		ref == "-" || strings.HasSuffix(ref, ".tar") || strings.HasSuffix(ref, ".tar.gz") || strings.HasSuffix(ref, ".tgz")
}

func (c *cli) create(args []string) int {
	p, code, done := c.parse(createSpec, args)
	if done {
		return code
	}
	if p.has("from") {
		for _, other := range []string{"image", "smolfile"} {
			if p.has(other) {
				f := createSpec.flags[slices.IndexFunc(createSpec.flags, func(f flagSpec) bool { return f.long == other })]
				return c.usage(&usageError{msg: fmt.Sprintf("the argument '--from <PATH>' cannot be used with '%s'", f.display()), usage: createSpec.usage})
			}
		}
	}
	if p.has("smolfile") {
		fmt.Fprintln(c.stderr, "fakesmolvm: --smolfile is not implemented by the fake")
		return 3
	}

	m := &machine{State: "created", CPUs: 4, MemoryMiB: 8192, CreatedAt: time.Now().Unix(), Labels: map[string]string{}}
	name, ok := p.value("name")
	if !ok {
		var b [4]byte
		_, _ = rand.Read(b[:])
		name = "vm-" + hex.EncodeToString(b[:])
	}
	if reason := validateName(name); reason != "" {
		return c.runtimeError("config operation failed: create machine: invalid machine name '%s': %s", name, reason)
	}
	m.Name = name

	// Values clap parses before anything runs: a bad one is a usage error.
	if v, ok := p.value("cpus"); ok {
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil {
			return c.usage(&usageError{msg: fmt.Sprintf("invalid value '%s' for '--cpus <N>': %v", v, numErr(err)), usage: createSpec.usage})
		}
		m.CPUs = int(n)
	}
	if v, ok := p.value("mem"); ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return c.usage(&usageError{msg: fmt.Sprintf("invalid value '%s' for '--mem <MiB>': %v", v, numErr(err)), usage: createSpec.usage})
		}
		m.MemoryMiB = int(n)
	}
	for _, flag := range []string{"storage", "overlay"} {
		if v, ok := p.value(flag); ok {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return c.usage(&usageError{msg: fmt.Sprintf("invalid value '%s' for '--%s <GiB>': %v", v, flag, numErr(err)), usage: createSpec.usage})
			}
			gb := int(n)
			if flag == "storage" {
				m.StorageGB = &gb
			} else {
				m.OverlayGB = &gb
			}
		}
	}
	for _, l := range p.values["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return c.usage(&usageError{msg: fmt.Sprintf("invalid value '%s' for '--label <KEY=VALUE>': expected KEY=VALUE", l), usage: createSpec.usage})
		}
		m.Labels[k] = v
	}
	for _, cidr := range p.values["allow-cidr"] {
		norm, err := parseCIDR(cidr)
		if err != nil {
			return c.usage(&usageError{msg: fmt.Sprintf("invalid value '%s' for '--allow-cidr <CIDR>': %v", cidr, err), usage: createSpec.usage})
		}
		m.AllowCIDRs = append(m.AllowCIDRs, norm)
	}
	for _, port := range p.values["port"] {
		if err := checkPort(port); err != nil {
			return c.usage(&usageError{msg: fmt.Sprintf("invalid value '%s' for '--port <HOST:GUEST>': %v", port, err), usage: createSpec.usage})
		}
		m.Ports = append(m.Ports, port)
	}
	if v, ok := p.value("net-backend"); ok {
		if v != "tsi" && v != "virtio-net" {
			return c.usage(&usageError{msg: fmt.Sprintf("invalid value '%s' for '--net-backend <BACKEND>'\n  [possible values: tsi, virtio-net]", v), usage: createSpec.usage})
		}
		m.NetBackend = v
	}

	// Checks made at run time: exit 1.
	if m.CPUs == 0 {
		return c.runtimeError("config operation failed: create machine: cpus must be at least 1")
	}
	if m.MemoryMiB == 0 {
		return c.runtimeError("config operation failed: create machine: memory must be at least 1 MiB")
	}
	if _, dup := c.st.Machines[name]; dup {
		return c.runtimeError("config operation failed: create machine: machine '%s' already exists", name)
	}
	for _, h := range p.values["allow-host"] {
		// The real CLI resolves every allowed host on the host at create
		// time and fails hard when one does not resolve. The fake resolves
		// nothing, but a wildcard, a port or a path never resolves.
		if h == "" || strings.ContainsAny(h, "*:/ @") {
			return c.runtimeError("config operation failed: --allow-host: failed to resolve '%s': not a hostname", h)
		}
		m.AllowHosts = append(m.AllowHosts, h)
	}
	for _, vol := range p.values["volume"] {
		parts := strings.Split(vol, ":")
		if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro") || !strings.HasPrefix(parts[1], "/") {
			return c.runtimeError("invalid mount path: '%s' is not HOST:GUEST[:ro] with an absolute guest path", vol)
		}
		if _, err := os.Stat(parts[0]); err != nil {
			return c.runtimeError("mount source not found: %s", parts[0])
		}
		m.Mounts = append(m.Mounts, vol)
	}
	m.OutboundLocalhostOnly = p.switches["outbound-localhost-only"]
	if m.OutboundLocalhostOnly {
		m.AllowCIDRs = append(m.AllowCIDRs, "127.0.0.0/8", "::1/128")
	}
	m.DNS, _ = p.value("dns")
	m.NetworkName, _ = p.value("network")
	m.Network = p.switches["net"] || len(m.AllowCIDRs) > 0 || len(m.AllowHosts) > 0 || m.DNS != "" || m.NetworkName != ""
	if m.NetBackend == "tsi" && (len(m.AllowCIDRs) > 0 || len(m.AllowHosts) > 0 || len(m.Ports) > 0 || m.NetworkName != "") {
		return c.runtimeError("config operation failed: create machine: --net-backend tsi cannot enforce an egress allow-list, published ports or a named network; use virtio-net")
	}
	for _, e := range p.values["env"] {
		kv, ok := c.envValue(e)
		if kv == "" {
			if !ok {
				return c.runtimeError("config operation failed: create machine: invalid environment variable '%s'", e)
			}
			continue
		}
		m.Env = append(m.Env, kv)
	}
	m.Workdir, _ = p.value("workdir")
	m.Init = p.values["init"]

	if from, ok := p.value("from"); ok {
		abs, err := filepath.Abs(from)
		if err != nil {
			return c.runtimeError("config operation failed: create machine: %v", err)
		}
		man, err := readManifest(abs)
		if err != nil {
			return c.runtimeError("config operation failed: create machine: %v", err)
		}
		// Command-line flags override the manifest; cpus and mem only when
		// they differ from the defaults (reference section 2).
		img := man.Image
		m.Image = &img
		m.Entrypoint, m.Cmd = man.Entrypoint, man.Cmd
		if !p.has("cpus") || m.CPUs == 4 {
			m.CPUs = man.CPUs
		}
		if !p.has("mem") || m.MemoryMiB == 8192 {
			m.MemoryMiB = man.Mem
		}
		if len(m.Env) == 0 {
			m.Env = man.Env
		}
		if m.Workdir == "" {
			m.Workdir = man.Workdir
		}
		m.Files = man.Files
		m.SourceSmolmachine = abs
	} else if img, ok := p.value("image"); ok {
		if img == "" {
			return c.runtimeError("config operation failed: create machine: --image must not be empty")
		}
		m.Image = &img
	}
	if len(p.trailing) > 0 {
		for _, a := range p.trailing {
			if createSpec.knownLong(a) {
				fmt.Fprintf(c.stderr, "warning: '%s' after '--' is part of the workload, not a machine flag; it does not apply\n", a)
			}
		}
		m.Cmd = p.trailing
		m.Entrypoint = nil
	}

	c.st.Machines[name] = m
	if err := c.st.save(); err != nil {
		return c.saveFailed(err)
	}
	fmt.Fprintf(c.stdout, "Created machine: %s\n", name)
	fmt.Fprintf(c.stdout, "  CPUs: %d, Memory: %d MiB\n", m.CPUs, m.MemoryMiB)
	return 0
}

func numErr(err error) string {
	if ne, ok := err.(*strconv.NumError); ok {
		if ne.Err == strconv.ErrRange {
			return "number too large to fit in target type"
		}
		return "invalid digit found in string"
	}
	return err.Error()
}

func parseCIDR(s string) (string, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.String(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()).String(), nil
	}
	return "", fmt.Errorf("not a CIDR block or an IP address")
}

func checkPort(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) > 2 {
		return fmt.Errorf("expected HOST:GUEST or PORT")
	}
	for _, part := range parts {
		n, err := strconv.ParseUint(part, 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("port must be a number from 1 to 65535")
		}
	}
	return nil
}

// nameOrDefault is the machine a command without --name addresses.
func nameOrDefault(p *parsed) (string, bool) {
	if n, ok := p.value("name"); ok {
		return n, true
	}
	return "default", false
}

func (c *cli) start(args []string) int {
	p, code, done := c.parse(startSpec, args)
	if done {
		return code
	}
	name, _ := nameOrDefault(p)
	m, ok := c.st.Machines[name]
	if !ok {
		if name != "default" {
			return c.runtimeError("vm not found: %s", name)
		}
		// No --name and no default record: boot a default bare VM.
		m = &machine{Name: "default", State: "created", CPUs: 4, MemoryMiB: 8192, CreatedAt: time.Now().Unix(), Labels: map[string]string{}}
		c.st.Machines[name] = m
	}
	if m.State == "running" {
		fmt.Fprintf(c.stdout, "Machine '%s' already running (PID: %d)\n", name, *m.PID)
		return 0
	}
	fmt.Fprintf(c.stdout, "Starting machine '%s'...\n", name)
	if m.SourceSmolmachine != "" {
		if _, err := os.Stat(m.SourceSmolmachine); err != nil {
			return c.runtimeError("agent operation failed: start machine: source .smolmachine not found: %s\nThe file may have been moved or deleted.", m.SourceSmolmachine)
		}
	} else if m.Image != nil {
		img := *m.Image
		fmt.Fprintf(c.stdout, "Pulling %s...\n", img)
		if isLocalImage(img) && img != "-" {
			if _, err := os.Stat(img); err != nil {
				return c.runtimeError("agent operation failed: pull image: %s: no such file or directory", img)
			}
			if strings.HasSuffix(img, ".tar") {
				if err := checkDockerSave(img); err != nil {
					return c.runtimeError("agent operation failed: pull image: %s: %v", img, err)
				}
			}
		} else if slices.Contains(splitList(c.getenv("FAKESMOLVM_MISSING_IMAGES")), img) {
			return c.runtimeError("agent operation failed: pull image: %s: manifest unknown", img)
		}
	}
	pid := c.st.NextPID
	c.st.NextPID++
	m.State, m.PID = "running", &pid
	m.BootExecsLeft, _ = strconv.Atoi(c.getenv("FAKESMOLVM_BOOT_EXECS"))
	if err := c.st.save(); err != nil {
		return c.saveFailed(err)
	}
	fmt.Fprintf(c.stdout, "Machine '%s' running (PID: %d)\n", name, pid)
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func (c *cli) stop(args []string) int {
	p, code, done := c.parse(stopSpec, args)
	if done {
		return code
	}
	name, _ := nameOrDefault(p)
	m, ok := c.st.Machines[name]
	if !ok {
		return c.runtimeError("vm not found: %s", name)
	}
	if m.State != "running" {
		fmt.Fprintf(c.stdout, "Machine '%s' is not running (state: %s)\n", name, m.State)
		return 0
	}
	fmt.Fprintf(c.stdout, "Stopping machine '%s'...\n", name)
	m.State, m.PID = "stopped", nil
	if err := c.st.save(); err != nil {
		return c.saveFailed(err)
	}
	fmt.Fprintf(c.stdout, "Stopped machine: %s\n", name)
	return 0
}

// update changes a stopped (or created) machine's env and workdir, for
// its next start: --remove-env first, then each -e (KEY=VALUE, or KEY to
// forward the host's value, as create does), replacing a key already set.
func (c *cli) update(args []string) int {
	p, code, done := c.parse(updateSpec, args)
	if done {
		return code
	}
	name, _ := p.value("name")
	m, ok := c.st.Machines[name]
	if !ok {
		return c.runtimeError("vm not found: %s", name)
	}
	if m.State != "stopped" && m.State != "created" {
		return c.runtimeError("config operation failed: update machine: machine '%s' is %s; stop it first with 'smolvm machine stop --name %s'", name, m.State, name)
	}
	drop := func(key string) {
		m.Env = slices.DeleteFunc(m.Env, func(kv string) bool { k, _, _ := strings.Cut(kv, "="); return k == key })
	}
	for _, k := range p.values["remove-env"] {
		drop(k)
	}
	for _, e := range p.values["env"] {
		kv, ok := c.envValue(e)
		if kv == "" {
			if !ok {
				return c.runtimeError("config operation failed: update machine: invalid environment variable '%s'", e)
			}
			continue
		}
		k, _, _ := strings.Cut(kv, "=")
		drop(k)
		m.Env = append(m.Env, kv)
	}
	if w, ok := p.value("workdir"); ok {
		m.Workdir = w
	}
	if err := c.st.save(); err != nil {
		return c.saveFailed(err)
	}
	fmt.Fprintf(c.stdout, "Updated machine: %s\n", name)
	return 0
}

func (c *cli) delete(args []string) int {
	p, code, done := c.parse(deleteSpec, args)
	if done {
		return code
	}
	name, _ := p.value("name")
	m, ok := c.st.Machines[name]
	if !ok {
		return c.runtimeError("vm not found: %s", name)
	}
	// The real CLI stops a running machine before it asks.
	if m.State == "running" {
		fmt.Fprintf(c.stdout, "Stopping machine '%s'...\n", name)
		m.State, m.PID = "stopped", nil
		if err := c.st.save(); err != nil {
			return c.saveFailed(err)
		}
	}
	if !p.switches["force"] {
		fmt.Fprintf(c.stderr, "Delete machine '%s'? [y/N] ", name)
		line, _ := bufio.NewReader(c.stdin).ReadString('\n')
		answer := strings.ToLower(strings.TrimSpace(line))
		if answer != "y" && answer != "yes" {
			fmt.Fprintln(c.stdout, "Cancelled")
			return 0
		}
	}
	delete(c.st.Machines, name)
	if err := c.st.save(); err != nil {
		return c.saveFailed(err)
	}
	fmt.Fprintf(c.stdout, "Deleted machine: %s\n", name)
	return 0
}

func (c *cli) exec(args []string) int {
	p, code, done := c.parse(execSpec, args)
	if done {
		return code
	}
	if p.switches["detach"] && (p.switches["interactive"] || p.switches["tty"] || p.switches["stream"]) {
		return c.usage(&usageError{msg: "the argument '--detach' cannot be used with '--interactive', '--tty' or '--stream'", usage: execSpec.usage})
	}
	name, named := nameOrDefault(p)
	m, ok := c.st.Machines[name]
	if !ok || m.State != "running" {
		hint := "smolvm machine start"
		if named {
			hint += " --name " + name
		}
		return c.runtimeError("machine '%s' is not running. Use '%s' first.", name, hint)
	}
	if m.BootExecsLeft > 0 {
		m.BootExecsLeft--
		if err := c.st.save(); err != nil {
			return c.saveFailed(err)
		}
		return c.runtimeError("agent operation failed: connect: the agent of machine '%s' is not ready yet", name)
	}
	if p.switches["detach"] {
		fmt.Fprintln(c.stdout, *m.PID+1000)
		return 0
	}
	cmd := p.trailing
	// Without -i the guest's stdin is empty, as smolvm forwards none.
	stdin := io.Reader(strings.NewReader(""))
	if p.switches["interactive"] {
		stdin = c.stdin
	}
	switch cmd[0] {
	case "cat":
		io.Copy(c.stdout, stdin)
		return 0
	case "sh", "/bin/sh":
		return c.shell(cmd[1:], stdin)
	case "true":
		return 0
	case "false":
		return 1
	case "echo":
		fmt.Fprintln(c.stdout, strings.Join(cmd[1:], " "))
		return 0
	case "env":
		env := append(append([]string{}, m.Env...), p.values["env"]...)
		for _, kv := range env {
			fmt.Fprintln(c.stdout, kv)
		}
		return 0
	case "pwd":
		wd := m.Workdir
		if v, ok := p.value("workdir"); ok {
			wd = v
		}
		if wd == "" {
			wd = "/"
		}
		fmt.Fprintln(c.stdout, wd)
		return 0
	case "touch":
		for _, f := range cmd[1:] {
			if !slices.Contains(m.Files, f) {
				m.Files = append(m.Files, f)
			}
		}
		slices.Sort(m.Files)
		if err := c.st.save(); err != nil {
			return c.saveFailed(err)
		}
		return 0
	case "rm":
		m.Files = slices.DeleteFunc(m.Files, func(f string) bool { return slices.Contains(cmd[1:], f) })
		if err := c.st.save(); err != nil {
			return c.saveFailed(err)
		}
		return 0
	case "test":
		if len(cmd) == 3 && cmd[1] == "-e" && slices.Contains(m.Files, cmd[2]) {
			return 0
		}
		return 1
	}
	return 0
}

// shell stands in for a guest sh: "sh -c SCRIPT" or, without -c, the
// lines of stdin as scripts. A script is commands separated by ";": echo
// prints its arguments, "exit N" ends with code N, anything else is a
// command not found (127). The end of the input exits 0.
func (c *cli) shell(args []string, stdin io.Reader) int {
	var scripts []string
	if len(args) >= 2 && args[0] == "-c" {
		scripts = []string{args[1]}
	} else {
		b, _ := io.ReadAll(stdin)
		scripts = strings.Split(string(b), "\n")
	}
	for _, script := range scripts {
		for _, command := range strings.Split(script, ";") {
			fields := strings.Fields(command)
			switch {
			case len(fields) == 0:
			case fields[0] == "echo":
				fmt.Fprintln(c.stdout, strings.Join(fields[1:], " "))
			case fields[0] == "exit":
				code := 0
				if len(fields) > 1 {
					code, _ = strconv.Atoi(fields[1])
				}
				return code
			default:
				fmt.Fprintf(c.stderr, "sh: %s: not found\n", fields[0])
				return 127
			}
		}
	}
	return 0
}

func (c *cli) ls(args []string) int {
	p, code, done := c.parse(lsSpec, args)
	if done {
		return code
	}
	names := c.st.names()
	if p.switches["json"] {
		entries := make([]listEntry, 0, len(names))
		for _, n := range names {
			entries = append(entries, c.st.Machines[n].listEntry())
		}
		b, err := json.MarshalIndent(entries, "", "  ")
		if err != nil {
			return c.runtimeError("config operation failed: serialize json: %v", err)
		}
		fmt.Fprintln(c.stdout, string(b))
		return 0
	}
	if len(names) == 0 {
		fmt.Fprintln(c.stdout, "No machines found")
		return 0
	}
	fmt.Fprintf(c.stdout, "%-20s %-12s %5s %10s\n", "NAME", "STATE", "CPUS", "MEMORY")
	fmt.Fprintln(c.stdout, strings.Repeat("-", 50))
	for _, n := range names {
		m := c.st.Machines[n]
		fmt.Fprintf(c.stdout, "%-20s %-12s %5d %10s\n", n, m.State, m.CPUs, fmt.Sprintf("%d MiB", m.MemoryMiB))
	}
	return 0
}

func (c *cli) status(args []string) int {
	p, code, done := c.parse(statusSpec, args)
	if done {
		return code
	}
	name, _ := nameOrDefault(p)
	m, ok := c.st.Machines[name]
	if !ok {
		return c.runtimeError("vm not found: %s", name)
	}
	if p.switches["json"] {
		b, err := json.MarshalIndent(m.listEntry(), "", "  ")
		if err != nil {
			return c.runtimeError("config operation failed: serialize json: %v", err)
		}
		fmt.Fprintln(c.stdout, string(b))
		return 0
	}
	if m.State == "running" {
		fmt.Fprintf(c.stdout, "Machine '%s': running (PID: %d)\n", name, *m.PID)
	} else {
		fmt.Fprintf(c.stdout, "Machine '%s': %s\n", name, m.State)
	}
	return 0
}

// checkDockerSave reads the headers of a local image tar: smolvm loads a
// "docker save" archive, which has a manifest.json at its top.
func checkDockerSave(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("not a docker-save archive: no manifest.json")
		}
		if err != nil {
			return fmt.Errorf("not a docker-save archive: %v", err)
		}
		if strings.TrimPrefix(h.Name, "./") == "manifest.json" {
			return nil
		}
	}
}

// envValue reads one -e value as smolvm does: KEY=VALUE, or KEY alone to
// forward the host's value (skipped, with a warning, when the host has
// none: "" and true). An empty key is invalid ("" and false).
func (c *cli) envValue(e string) (string, bool) {
	k, v, hasValue := strings.Cut(e, "=")
	if k == "" {
		return "", false
	}
	if !hasValue {
		if v = c.getenv(k); v == "" {
			fmt.Fprintf(c.stderr, "warning: -e %s: %s is not set on the host; skipping it\n", k, k)
			return "", true
		}
	}
	return k + "=" + v, true
}
