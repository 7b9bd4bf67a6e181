package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/state"
)

// Archiving (Options.Archive: bottlefile archive, an idle policy's
// archive_after) puts an agent away without losing what it wrote: its
// filesystem is committed to a policy snapshot (trigger "archive"), then
// each of its objects but its images and snapshots (its workload, its
// sidecars', its gateway, its network) is marked archived on its record
// (ArchivedKey; the agent's workload also names the snapshot,
// ArchiveSnapshotKey) and removed from its runtime. The records stay: an
// archived agent is not drift, and plan says No changes.
//
// bottlefile start, exec, or an apply that changes the agent resumes it:
// what was archived is created again, the agent's workload booting from
// the archive snapshot (whatever resume says), and the records lose the
// marks. Retention never prunes the archive snapshot while the agent is
// archived. A destroy forgets the records; the snapshot follows the
// snapshot policy, as a destroy's snapshots do.
//
// Every step is a planned action recorded as it completes, the mark
// before the removal. An apply cut off half way leaves an agent with some
// records marked: the next plan archives the rest of it (committing it
// again first when its workload is still there), so nothing is lost.

// ArchivedKey is the computed value, on a record, that marks the object
// archived: when, in RFC 3339.
const ArchivedKey = "archived"

// ArchiveSnapshotKey is the computed value, on an archived agent's
// workload record, naming the snapshot it is kept in.
const ArchiveSnapshotKey = "archive_snapshot"

// ArchiveTrigger is the trigger of an archive's snapshot.
const ArchiveTrigger = "archive"

// IsArchived reports whether the record is marked archived.
func IsArchived(rec *state.Record) bool {
	return rec != nil && rec.Computed[ArchivedKey] != ""
}

// ArchivedAt is when the record was archived; ok is false when it is not
// archived or the time cannot be read.
func ArchivedAt(rec state.Record) (at time.Time, ok bool) {
	v := rec.Computed[ArchivedKey]
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// bottle is the changes of one agent an archive acts on.
type bottle struct {
	agent    string
	workload *Change   // the agent's own workload, nil when there is none
	members  []*Change // every archivable change, the workload among them
}

// archived reports whether any record of the bottle is marked.
func (b *bottle) archived() bool {
	return slices.ContainsFunc(b.members, func(c *Change) bool { return IsArchived(c.Prior) })
}

// archiveSnapshot is the snapshot the bottle's records name, "" if none.
func (b *bottle) archiveSnapshot() string {
	for _, c := range b.members {
		if c.Prior != nil && c.Prior.Computed[ArchiveSnapshotKey] != "" {
			return c.Prior.Computed[ArchiveSnapshotKey]
		}
	}
	return ""
}

// archivedSince is the earliest archive time of the bottle's records.
func (b *bottle) archivedSince() string {
	var first time.Time
	for _, c := range b.members {
		if c.Prior == nil {
			continue
		}
		if at, ok := ArchivedAt(*c.Prior); ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return formatCreated(first)
}

// bottles groups the changes an archive acts on by agent address: every
// object below an agent's address that was recorded, other than its
// images and snapshots, and not a stray or twin copy.
func bottles(changes map[string]*Change) map[string]*bottle {
	out := map[string]*bottle{}
	for _, addr := range sortedKeys(changes) {
		c := changes[addr]
		if c.Prior == nil || c.Stray || c.Twin || c.Kind == drivers.KindSnapshot || c.Kind == kindImage || c.Prior.Kind == kindImage {
			continue
		}
		a, ok := addrs.AgentOf(c.Addr)
		if !ok {
			continue
		}
		b := out[a.String()]
		if b == nil {
			b = &bottle{agent: a.String()}
			out[a.String()] = b
		}
		b.members = append(b.members, c)
		if c.Addr == b.agent && c.Prior.Workload {
			b.workload = c
		}
	}
	return out
}

// planArchive plans what Options.Archive asks for: each named agent
// committed to a snapshot and archived. Every other change is dropped, but
// the prunes the snapshot's policy calls for.
func (p *Planner) planArchive(changes map[string]*Change, agents map[string]*agentPlan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if p.Options.Destroy || p.Options.RefreshOnly || len(p.Options.Take) > 0 || len(p.Options.Stop) > 0 || len(p.Options.Start) > 0 {
		return append(diags, errorDiag("Cannot archive in this plan", "bottlefile archive makes a plan of its own, not with -destroy, -refresh-only, a snapshot take, stop or start.", nil))
	}
	snaps := indexSnapshots(changes)
	bs := bottles(changes)
	keep := map[string]bool{}
	for _, agent := range p.Options.Archive {
		b, ap := bs[agent], agents[agent]
		if b == nil || b.workload == nil || ap == nil {
			d := errorDiag("No such agent", fmt.Sprintf("%s names no agent of the configuration with a workload recorded in the state, so there is nothing to archive.", agent), nil)
			d.Extra = UnknownAddress{Given: agent, Known: agentAddrs(changes)}
			diags = append(diags, d)
			continue
		}
		if d := p.archiveBottle(changes, snaps, b, ap, nil); d != nil {
			diags = append(diags, d)
			continue
		}
		for _, c := range b.members {
			keep[c.Addr] = true
		}
		for _, c := range snaps[agent] {
			if ArchiveKeeps(c) {
				keep[c.Addr] = true
			}
		}
	}
	for addr, c := range changes {
		if !keep[addr] {
			delete(changes, addr)
			continue
		}
		if c.Object.Workload || (c.Prior != nil && c.Prior.Workload) {
			c.Policy = c.Prior.Computed[PolicyKey] // recorded as it was (stop.go)
		}
	}
	return diags
}

// ArchiveKeeps reports whether a plan that archives an agent (archive, a
// tick) keeps c, one of the agent's snapshot changes: the snapshot it
// takes, a prune, and the removal of a snapshot image an archive cut off
// before recording it left (else a tick would leave it for an apply, and
// the plan after it would not be empty).
func ArchiveKeeps(c *Change) bool {
	return c.Action == Create || (c.Action == Delete && (c.Prior != nil || c.Live != nil))
}

// archiveBottle plans archiving one agent: a snapshot of its workload
// when the workload is there (running or stopped), then each object
// still live, or recorded and not yet marked, archived after it. why, when
// set, is the reason each object gives (an archive cut off half way). An
// agent whose workload is gone and whose records name no archive snapshot
// cannot be archived: nothing would keep what it wrote.
func (p *Planner) archiveBottle(changes map[string]*Change, snaps snapshotIndex, b *bottle, ap *agentPlan, why *Reason) *hcl.Diagnostic {
	w := b.workload
	var taken *Change
	to := b.archiveSnapshot()
	if w.Live != nil {
		taken = newPolicySnapshot(changes, snaps, ap, w, "before archive", ArchiveTrigger,
			because(ReasonArchiveSnapshot, "agent", b.agent))
		spec := ap.spec
		taken.AgentSpec = &spec
		to = taken.Addr
	} else if to == "" {
		return errorDiag(fmt.Sprintf("Cannot archive %s", b.agent),
			fmt.Sprintf("%s: %s, and no archive snapshot keeps what it wrote. Run bottlefile apply to create it again.", b.agent, notRunning(w)), ap.agent.DeclRange.Ptr())
	}
	for _, c := range b.members {
		if c.Live == nil && IsArchived(c.Prior) {
			c.Action, c.Reasons = NoOp, nil
			continue
		}
		c.Action, c.StateOnly, c.Changed, c.Forcing = Archive, false, nil, nil
		c.Restarted, c.BootFrom, c.Carry, c.CarryFrom = false, "", nil, ""
		c.Reasons = []Reason{because(ReasonArchive, "agent", b.agent, "snapshot", to)}
		if why != nil {
			c.Reasons = []Reason{*why}
		}
		if taken != nil {
			c.SnapshotFirst = taken.Addr
		}
		if c == w {
			c.ArchiveTo = to
		}
	}
	if policy := ap.val.SnapshotPolicy; policy != nil && taken != nil {
		// Pruned once the workload is archived: it may run the image of
		// one pruned (what it booted from), which the engine keeps while
		// the workload is there.
		prune(snaps[b.agent], b.agent, policy, taken, 0, p.pinned(w), p.now())
		for _, c := range snaps[b.agent] {
			if c.Action == Delete && slices.Contains(c.DeleteAfter, taken.Addr) && !slices.Contains(c.DeleteAfter, w.Addr) {
				c.DeleteAfter = append(c.DeleteAfter, w.Addr)
			}
		}
	}
	return nil
}

// planArchived decides, in a plan that is not an archive of its own, what
// becomes of each archived agent (one with any record marked): resumed
// when resume names it (start) or a change of its configuration needs it,
// left archived otherwise, where an archive cut off half way is finished.
// It runs before planPolicies, which picks the archive snapshot as what a
// resumed workload boots from (resumeArchived).
func (p *Planner) planArchived(changes map[string]*Change, agents map[string]*agentPlan, resume []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if p.Options.Destroy {
		return nil // its records are forgotten; the snapshot follows the policy
	}
	var snaps snapshotIndex
	bs := bottles(changes)
	for _, agent := range sortedKeys(bs) {
		b := bs[agent]
		if !b.archived() {
			continue
		}
		ap := agents[agent]
		if ap == nil {
			continue // its block is gone: its records are forgotten (removed.go)
		}
		what := ""
		if slices.Contains(resume, agent) {
			what = "start"
		}
		for _, c := range b.members {
			// An archived object planned anything but staying away: its
			// configuration, or something it depends on, changed.
			if what == "" && c.Live == nil && IsArchived(c.Prior) && (c.Action == Create || c.Action == Replace) {
				what = "a change of its configuration"
			}
		}
		for _, c := range changes {
			// An object of the bottle new in the configuration (a sidecar,
			// a gateway) is made on its network: the bottle comes back.
			if a, ok := addrs.AgentOf(c.Addr); what == "" && ok && a.String() == agent && c.Prior == nil && c.Action == Create &&
				c.Kind != drivers.KindSnapshot && c.Kind != kindImage && !c.Stray && !c.Twin {
				what = "a change of its configuration"
			}
		}
		if w := b.workload; what != "" && w != nil && w.Live == nil && w.Prior.Runtime != w.Runtime {
			diags = append(diags, errorDiag(fmt.Sprintf("Cannot resume %s on another runtime", agent),
				fmt.Sprintf("%s is archived on runtime %q, in a snapshot there, and its runtime is now %q. Set the runtime back, resume it with bottlefile start, then move it.", agent, w.Prior.Runtime, w.Runtime), ap.agent.RuntimeRange.Ptr()))
			continue
		}
		if what != "" {
			unarchive(b, what)
			continue
		}
		if !slices.ContainsFunc(b.members, func(c *Change) bool { return c.Live != nil || !IsArchived(c.Prior) }) {
			continue // archived, and stays so
		}
		if snaps == nil {
			snaps = indexSnapshots(changes)
		}
		why := because(ReasonArchiveFinish, "agent", agent)
		if b.workload == nil {
			continue
		}
		if d := p.archiveBottle(changes, snaps, b, ap, &why); d != nil {
			diags = append(diags, d)
		}
	}
	return diags
}

// unarchive plans resuming an archived agent: each of its objects that is
// gone created again, one still there (an archive cut off) recorded
// without the marks. resumeArchived picks what the workload boots from.
func unarchive(b *bottle, what string) {
	for _, c := range b.members {
		why := because(ReasonArchiveResume, "agent", b.agent, "what", what, "at", b.archivedSince())
		switch {
		case c.Live == nil:
			c.Action = Create
			c.Reasons = append([]Reason{why}, withoutCode(c.Reasons, ReasonArchivedChanged, ReasonGoneRecreate)...)
		case c.Action == NoOp:
			c.Action, c.StateOnly = Update, true
			c.Reasons = []Reason{why}
		default:
			c.Reasons = append([]Reason{why}, c.Reasons...)
		}
	}
}

// withoutCode is reasons without those of the given codes.
func withoutCode(reasons []Reason, codes ...ReasonCode) []Reason {
	return slices.DeleteFunc(slices.Clone(reasons), func(r Reason) bool { return slices.Contains(codes, r.Code) })
}

// resumeArchived makes the archived workload w, created again, boot from
// its archive snapshot, whatever resume says: what it wrote is there
// alone. It reports false when w is not such a workload; when the
// snapshot is gone it says so, and the workload boots as a resume would.
func resumeArchived(changes map[string]*Change, w *Change, ap *agentPlan) bool {
	if w == nil || w.Action != Create || !IsArchived(w.Prior) {
		return false
	}
	addr := w.Prior.Computed[ArchiveSnapshotKey]
	from := changes[addr]
	if addr == "" || from == nil || from.Prior == nil || from.Action == Delete || from.Action == Forget {
		w.Reasons = append(w.Reasons, because(ReasonArchiveNoSnapshot, "agent", ap.agent.Addr(), "snapshot", addr))
		return false
	}
	w.BootFrom = from.Addr
	carried, note := carryFromSnapshot(w, from, nil, ap) // a new image: workspace.go
	if carried {
		return true
	}
	at := ""
	if t, ok := ArchivedAt(*w.Prior); ok {
		at = formatCreated(t)
	}
	w.Reasons = append(w.Reasons, because(ReasonArchiveResumes, "snapshot", from.Addr, "at", at))
	if note.Code != "" {
		w.Reasons = append(w.Reasons, note)
	}
	return true
}

// archivePinned is the archive snapshot of the workload w's record, which
// retention keeps while the agent is archived and in the plan that
// resumes it; "" when there is none.
func archivePinned(w *Change) string {
	if w == nil || w.Prior == nil {
		return ""
	}
	return w.Prior.Computed[ArchiveSnapshotKey]
}
