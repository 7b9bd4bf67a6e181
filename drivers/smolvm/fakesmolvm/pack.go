package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

var packCreateSpec = cmdSpec{
	usage: "smolvm pack create <--image <IMAGE>|--from-vm <NAME>|--smolfile <PATH>> --output <PATH> [OPTIONS]",
	flags: []flagSpec{
		{long: "image", short: 'I', value: "IMAGE"},
		{long: "from-vm", value: "NAME"},
		{long: "smolfile", short: 's', value: "PATH"},
		{long: "output", short: 'o', value: "PATH"},
		{long: "cpus", value: "N"},
		{long: "mem", value: "MiB"},
		{long: "oci-platform", value: "OS/ARCH"},
		{long: "entrypoint", value: "CMD"},
		{long: "no-sign"},
		{long: "single-file"},
		{long: "gpu"},
		{long: "staging-dir", value: "DIR"},
		{long: "rebase-from-image"},
		{long: "proxy", value: "URL"},
		{long: "no-proxy", value: "LIST"},
	},
	required: []string{"output"},
}

// manifest stands in for a .smolmachine sidecar: the real one is a zstd
// tar of assets followed by a JSON manifest and a footer; the fake writes
// the manifest alone, plus the machine's file set as its "payload".
type manifest struct {
	Magic         string   `json:"magic"` // "FAKESMOLPACK"
	Mode          string   `json:"mode"`
	Image         string   `json:"image"`
	Digest        string   `json:"digest"`
	Platform      string   `json:"platform"`
	Entrypoint    []string `json:"entrypoint"`
	Cmd           []string `json:"cmd"`
	Env           []string `json:"env"`
	SecretRefs    []string `json:"secret_refs"`
	Workdir       string   `json:"workdir"`
	CPUs          int      `json:"cpus"`
	Mem           int      `json:"mem"`
	ImageSize     int64    `json:"image_size"`
	Network       bool     `json:"network"`
	GPU           bool     `json:"gpu"`
	CUDA          bool     `json:"cuda"`
	HostPlatform  string   `json:"host_platform"`
	Created       int64    `json:"created"`
	SmolvmVersion string   `json:"smolvm_version"`
	SourceVM      string   `json:"source_vm,omitempty"`
	Files         []string `json:"files"`
}

const manifestMagic = "FAKESMOLPACK"

func readManifest(path string) (*manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf(".smolmachine not found: %s", path)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Magic != manifestMagic {
		return nil, fmt.Errorf("%s is not a .smolmachine (bad footer magic)", path)
	}
	if m.HostPlatform != hostPlatform() {
		return nil, fmt.Errorf("%s was packed for %s and cannot run on %s", path, m.HostPlatform, hostPlatform())
	}
	return &m, nil
}

func hostPlatform() string { return runtime.GOOS + "/" + runtime.GOARCH }

func (c *cli) pack(args []string) int {
	const usage = "smolvm pack <COMMAND>"
	if len(args) == 0 {
		fmt.Fprintf(c.stderr, "Usage: %s\n", usage)
		return 2
	}
	switch args[0] {
	case "create":
		return c.packCreate(args[1:])
	case "run", "push", "pull", "inspect", "prune":
		fmt.Fprintf(c.stderr, "fakesmolvm: smolvm pack %s is not implemented by the fake\n", args[0])
		return 3
	}
	return c.usage(&usageError{msg: fmt.Sprintf("unrecognized subcommand '%s'", args[0]), usage: usage})
}

func (c *cli) packCreate(args []string) int {
	p, code, done := c.parse(packCreateSpec, args)
	if done {
		return code
	}
	var sources []string
	for _, s := range []string{"image", "from-vm", "smolfile"} {
		if p.has(s) {
			sources = append(sources, s)
		}
	}
	switch {
	case len(sources) == 0:
		return c.usage(&usageError{msg: "the following required arguments were not provided:\n  <--image <IMAGE>|--from-vm <NAME>|--smolfile <PATH>>", usage: packCreateSpec.usage})
	case len(sources) > 1:
		return c.usage(&usageError{msg: fmt.Sprintf("the argument '--%s' cannot be used with '--%s'", sources[0], sources[1]), usage: packCreateSpec.usage})
	case sources[0] == "smolfile":
		fmt.Fprintln(c.stderr, "fakesmolvm: pack create --smolfile is not implemented by the fake")
		return 3
	}
	if p.switches["rebase-from-image"] && !p.has("from-vm") {
		return c.usage(&usageError{msg: "the argument '--rebase-from-image' requires '--from-vm <NAME>'", usage: packCreateSpec.usage})
	}
	out, _ := p.value("output")
	if strings.HasSuffix(out, ".smolmachine") {
		return c.runtimeError("config operation failed: pack create: -o names the executable stub; the sidecar is written beside it as %s.smolmachine, so drop the .smolmachine suffix", strings.TrimSuffix(out, ".smolmachine"))
	}
	man := manifest{
		Magic: manifestMagic, Mode: "container", Platform: "linux/" + runtime.GOARCH,
		CPUs: 4, Mem: 8192, HostPlatform: hostPlatform(), Created: time.Now().Unix(),
		SmolvmVersion: c.version, Entrypoint: []string{}, Cmd: []string{}, Env: []string{},
		SecretRefs: []string{}, Files: []string{},
	}
	if name, ok := p.value("from-vm"); ok {
		m, ok := c.st.Machines[name]
		if !ok {
			return c.runtimeError("vm not found: %s", name)
		}
		if m.State == "running" {
			return c.runtimeError("config operation failed: pack create: machine '%s' is running; stop it first with 'smolvm machine stop --name %s'", name, name)
		}
		if m.Image == nil {
			man.Mode = "vm"
		} else {
			man.Image = *m.Image
		}
		man.Entrypoint, man.Cmd = nonNil(m.Entrypoint), nonNil(m.Cmd)
		man.Env, man.Workdir = nonNil(m.Env), m.Workdir
		man.CPUs, man.Mem, man.Network = m.CPUs, m.MemoryMiB, m.Network
		man.SourceVM = name
		man.Files = nonNil(m.Files)
	} else {
		man.Image, _ = p.value("image")
	}
	if v, ok := p.value("entrypoint"); ok {
		man.Entrypoint = []string{v}
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%v|%d", man.Image, man.Files, time.Now().UnixNano())))
	man.Digest = "sha256:" + hex.EncodeToString(sum[:])

	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return c.runtimeError("config operation failed: pack create: %v", err)
	}
	if dir := filepath.Dir(out); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return c.runtimeError("io operation failed: %v", err)
		}
	}
	stub := "#!/bin/sh\necho 'this is a fakesmolvm pack stub; it runs nothing' >&2\nexit 1\n"
	if err := os.WriteFile(out, []byte(stub), 0o755); err != nil {
		return c.runtimeError("io operation failed: %v", err)
	}
	if err := os.WriteFile(out+".smolmachine", b, 0o644); err != nil {
		return c.runtimeError("io operation failed: %v", err)
	}
	fmt.Fprintf(c.stdout, "Packed %s (sidecar %s.smolmachine)\n", out, out)
	return 0
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
