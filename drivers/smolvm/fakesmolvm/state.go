package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// machine is one record of the fake's database. The exported shape of
// ls --json and status --json is built from it by listEntry.
type machine struct {
	Name       string            `json:"name"`
	State      string            `json:"state"` // created, running, stopped
	CPUs       int               `json:"cpus"`
	MemoryMiB  int               `json:"memory_mib"`
	PID        *int              `json:"pid"`
	CreatedAt  int64             `json:"created_at"`
	Mounts     []string          `json:"mounts"`
	Ports      []string          `json:"ports"`
	StorageGB  *int              `json:"storage_gb"`
	OverlayGB  *int              `json:"overlay_gb"`
	Image      *string           `json:"image"`
	Entrypoint []string          `json:"entrypoint"`
	Cmd        []string          `json:"cmd"`
	Env        []string          `json:"env"`
	Workdir    string            `json:"workdir"`
	Labels     map[string]string `json:"labels"`
	Init       []string          `json:"init"`

	// Network settings as the create flags gave them. ls --json shows only
	// the network bool, as the real CLI does.
	Network               bool     `json:"network"`
	NetBackend            string   `json:"net_backend"`
	NetworkName           string   `json:"network_name"`
	DNS                   string   `json:"dns"`
	AllowCIDRs            []string `json:"allow_cidrs"`
	AllowHosts            []string `json:"allow_hosts"`
	OutboundLocalhostOnly bool     `json:"outbound_localhost_only"`

	// SourceSmolmachine is the absolute path of the pack a machine was
	// created from.
	SourceSmolmachine string `json:"source_smolmachine"`

	// Files stands in for the machine's persistent overlay: paths that
	// "touch" created in the guest. Packs carry them.
	Files []string `json:"files"`

	// BootExecsLeft is how many more execs fail as "agent not ready"
	// after a start (FAKESMOLVM_BOOT_EXECS).
	BootExecsLeft int `json:"boot_execs_left"`
}

// state is the whole fake database, kept in $FAKESMOLVM_STATE/state.json.
type state struct {
	Machines map[string]*machine `json:"machines"`
	NextPID  int                 `json:"next_pid"`

	path string
}

func loadState(dir string) (*state, error) {
	st := &state{Machines: map[string]*machine{}, NextPID: 4200, path: filepath.Join(dir, "state.json")}
	b, err := os.ReadFile(st.path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("reading %s: %w", st.path, err)
	}
	if st.Machines == nil {
		st.Machines = map[string]*machine{}
	}
	return st, nil
}

// save writes the database atomically.
func (st *state) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(st.path, b, 0o644)
}

func (st *state) names() []string {
	names := make([]string, 0, len(st.Machines))
	for n := range st.Machines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// listEntry is one element of ls --json, in the field order of the real
// CLI's machine_status_json (reference section 6).
type listEntry struct {
	Name                   string            `json:"name"`
	State                  string            `json:"state"`
	CPUs                   int               `json:"cpus"`
	MemoryMiB              int               `json:"memory_mib"`
	PID                    *int              `json:"pid"`
	Mounts                 int               `json:"mounts"`
	Ports                  int               `json:"ports"`
	CreatedAt              int64             `json:"created_at"`
	StorageGB              *int              `json:"storage_gb"`
	OverlayGB              *int              `json:"overlay_gb"`
	Image                  *string           `json:"image"`
	Entrypoint             []string          `json:"entrypoint"`
	Cmd                    []string          `json:"cmd"`
	Ephemeral              bool              `json:"ephemeral"`
	GPU                    bool              `json:"gpu"`
	GPUVramMiB             *int              `json:"gpu_vram_mib"`
	CUDA                   bool              `json:"cuda"`
	Forkable               bool              `json:"forkable"`
	CUDAForkPoolSize       *int              `json:"cuda_fork_pool_size"`
	CUDAVramLimitMiB       *int              `json:"cuda_vram_limit_mib"`
	ForkpointHeld          bool              `json:"forkpoint_held"`
	Labels                 map[string]string `json:"labels"`
	RestartPolicy          string            `json:"restart_policy"`
	RestartMaxRetries      int               `json:"restart_max_retries"`
	RestartCount           int               `json:"restart_count"`
	HealthCmd              *string           `json:"health_cmd"`
	HealthIntervalSecs     *int              `json:"health_interval_secs"`
	HealthTimeoutSecs      *int              `json:"health_timeout_secs"`
	HealthRetries          *int              `json:"health_retries"`
	HealthStartupGraceSecs *int              `json:"health_startup_grace_secs"`
	Network                bool              `json:"network"`
}

func (m *machine) listEntry() listEntry {
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	labels := m.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return listEntry{
		Name: m.Name, State: m.State, CPUs: m.CPUs, MemoryMiB: m.MemoryMiB, PID: m.PID,
		Mounts: len(m.Mounts), Ports: len(m.Ports), CreatedAt: m.CreatedAt,
		StorageGB: m.StorageGB, OverlayGB: m.OverlayGB, Image: m.Image,
		Entrypoint: nonNil(m.Entrypoint), Cmd: nonNil(m.Cmd),
		Labels: labels, RestartPolicy: "never", Network: m.Network,
	}
}
