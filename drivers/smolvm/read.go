package smolvm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/bottlefile/bottlefile/drivers"
)

// lsEntry is the part of one "machine ls --json" element the driver uses.
type lsEntry struct {
	Name   string            `json:"name"`
	State  string            `json:"state"`
	PID    *int              `json:"pid"`
	Image  *string           `json:"image"`
	Labels map[string]string `json:"labels"`
	// CreatedAt is when the machine was made, in unix seconds.
	CreatedAt int64 `json:"created_at"`
	// Network says whether the machine has any network at all.
	Network bool `json:"network"`
}

// Read lists the machines of one lineage with a single "machine ls
// --json", and its snapshots with one listing of the state directory's
// snapshots/<lineage[:8]> (see snapshot.go). Machines without an address
// label are not bottlefile's to manage by address and are left out
// (logged).
func (d *Driver) Read(ctx context.Context, req drivers.ReadRequest) (drivers.ReadResponse, error) {
	var resp drivers.ReadResponse
	if req.Lineage == "" {
		return resp, nil
	}
	run, err := d.cli()
	if err != nil {
		return resp, err
	}
	entries, err := d.list(ctx, run)
	if err != nil {
		return resp, fmt.Errorf("listing machines of lineage %s: %w", req.Lineage, err)
	}
	for _, e := range entries {
		if e.Labels[drivers.LabelLineage] != req.Lineage {
			continue
		}
		addr := e.Labels[drivers.LabelAddress]
		if addr == "" {
			d.log.Warn("machine with this lineage has no address label; ignoring it", "name", e.Name)
			continue
		}
		o := drivers.LiveObject{
			Addr:    addr,
			Kind:    kindMachine,
			ID:      e.Name,
			Name:    e.Name,
			Hash:    e.Labels[drivers.LabelConfigHash],
			Runtime: e.Labels[drivers.LabelRuntime],
			Running: e.State == "running",
			// smolvm reports no exit code and no start or stop time.
			State: e.State,
		}
		if e.CreatedAt > 0 {
			o.Created = time.Unix(e.CreatedAt, 0).UTC()
		}
		if e.Image != nil {
			// smolvm reports no image id; the reference stands in.
			o.ImageID = *e.Image
		}
		resp.Objects = append(resp.Objects, o)
	}
	snaps, err := d.readSnapshots(req.Lineage)
	if err != nil {
		return resp, fmt.Errorf("listing snapshots of lineage %s: %w", req.Lineage, err)
	}
	resp.Objects = append(resp.Objects, snaps...)
	sort.SliceStable(resp.Objects, func(i, j int) bool { return resp.Objects[i].Addr < resp.Objects[j].Addr })
	return resp, nil
}

// list runs "machine ls --json".
func (d *Driver) list(ctx context.Context, run runner) ([]lsEntry, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	out, err := run.run(lctx, []string{"machine", "ls", "--json"}, nil)
	if err != nil {
		return nil, err
	}
	return parseList(out)
}

// parseList reads the pretty JSON array of "machine ls --json". Lines
// before the array (a notice on stdout) are skipped.
func parseList(out []byte) ([]lsEntry, error) {
	data := bytes.TrimSpace(out)
	if !bytes.HasPrefix(data, []byte("[")) {
		i := bytes.Index(data, []byte("\n["))
		if i < 0 {
			return nil, fmt.Errorf("machine ls --json printed no JSON array: %q", shorten(string(data), 200))
		}
		data = data[i+1:]
	}
	var entries []lsEntry
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("reading the output of machine ls --json: %w", err)
	}
	return entries, nil
}

// find returns the machine with this name, or nil.
func find(entries []lsEntry, name string) *lsEntry {
	for i := range entries {
		if entries[i].Name == name {
			return &entries[i]
		}
	}
	return nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
