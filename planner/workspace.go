package planner

import (
	"path/filepath"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// Workspaces: when an agent's image changes, its replacement boots the
// new image and gets the agent's workspace paths carried over, from the
// snapshot it would have resumed from (a policy's, taken just before) or,
// when none is taken, from the workload it replaces. Without an image
// change a resume boots the snapshot as it always did.

// BaseKey is the computed value, on a snapshot's record, naming the image
// the snapshot's workload ran (ImageIdentity of its record): the plan
// compares it with the agent's image to tell an image change.
const BaseKey = "base"

// ImageIdentity is what names a workload's image among its attribute
// hashes: its image reference and its build context's hash.
func ImageIdentity(attrHashes map[string]string) string {
	if attrHashes == nil {
		return ""
	}
	return attrHashes["image"] + "/" + attrHashes["build_hash"]
}

// kindImage is the kind of a built image object (docker, swarm).
const kindImage = "image"

// ownImage reports whether the agent has an image of its own (a fork
// without one always boots its snapshot).
func ownImage(ap *agentPlan) bool {
	w := ap.val.Workload
	return !w.GetAttr("image").IsNull() || !w.GetAttr("build").IsNull()
}

// imageWords names the agent's image in a plan line.
func imageWords(ap *agentPlan, more ...string) []string {
	w := ap.val.Workload
	if img, _ := w.GetAttr("image").Unmark(); !img.IsNull() && img.IsKnown() && img.Type() == cty.String {
		return append([]string{"image", img.AsString()}, more...)
	}
	if b := w.GetAttr("build"); !b.IsNull() && b.IsKnown() {
		if ctx, _ := b.GetAttr("context").Unmark(); !ctx.IsNull() && ctx.IsKnown() {
			return append([]string{"build", filepath.Base(ctx.AsString())}, more...)
		}
	}
	return more
}

// imageChanged reports whether w's image differs from the one its
// recorded workload runs.
func imageChanged(w *Change) bool {
	return w.Prior != nil && ImageIdentity(w.Prior.AttrHashes) != ImageIdentity(w.Fingerprint.Attrs)
}

// snapshotImageChanged reports whether the image of the workload the
// snapshot from was taken of differs from w's: for one taken in this
// plan, the image w's record runs; otherwise the one its record names.
// known is false when the snapshot does not say (taken before this was
// recorded, or imported).
func snapshotImageChanged(w *Change, from, taken *Change) (changed, known bool) {
	if from == taken {
		return imageChanged(w), w.Prior != nil
	}
	if from.Prior == nil || from.Prior.Computed[BaseKey] == "" {
		return true, false
	}
	return from.Prior.Computed[BaseKey] != ImageIdentity(w.Fingerprint.Attrs), true
}

// carryFromSnapshot decides, for w resuming from the snapshot from, what
// it boots: with a changed image and a workspace, the new image with the
// workspace from the snapshot (and it says so, true), or from the
// workload it replaces when the snapshot is an older one (left to
// planCarry, true); without a workspace, the snapshot (false), with a
// note that the new image is not used, which goes after the line that
// says it resumes.
func carryFromSnapshot(w, from, taken *Change, ap *agentPlan) (bool, Reason) {
	if !ownImage(ap) {
		return false, Reason{}
	}
	if len(ap.val.Workspace) > 0 && from != taken && ap.agent.FromSnapshot == "" && w.Action == Replace && w.Live != nil && imageChanged(w) {
		// An older snapshot, while the workload it would replace holds
		// newer work: planCarry carries from that.
		w.BootFrom = ""
		return true, Reason{}
	}
	changed, known := snapshotImageChanged(w, from, taken)
	if !changed {
		return false, Reason{}
	}
	ws := ap.val.Workspace
	if len(ws) == 0 {
		if known {
			return false, because(ReasonResumeOldImage, imageWords(ap, "snapshot", from.Addr)...)
		}
		return false, Reason{}
	}
	w.BootFrom, w.Carry, w.CarryFrom = "", ws, from.Addr
	why := because(ReasonCarrySnapshot, imageWords(ap, "paths", strings.Join(ws, ", "), "snapshot", from.Addr)...)
	switch {
	case from == taken:
		why.set("just_before", "true")
	case !known:
		why.set("image_unknown", "true")
	}
	w.Reasons = append(w.Reasons, why)
	return true, Reason{}
}

// planCarry handles an image change that resume did not: a migration, or
// a replacement that boots no snapshot (no snapshot to resume from, or
// resume = false). The workspace comes from the snapshot taken first, or
// else from the workload being replaced, which then stays until the new
// one has it.
func planCarry(changes map[string]*Change, w, taken *Change, ap *agentPlan) {
	ws := ap.val.Workspace
	if len(ws) == 0 || !ownImage(ap) || w.Carry != nil || !imageChanged(w) {
		return
	}
	switch {
	case w.Action == Migrate && taken != nil:
		w.BootFrom, w.Carry, w.CarryFrom = "", ws, taken.Addr
		w.Reasons = append(w.Reasons, because(ReasonCarryMigrate, imageWords(ap, "paths", strings.Join(ws, ", "), "snapshot", taken.Addr)...))
	case w.Action != Replace || w.BootFrom != "" || w.Live == nil:
		return
	case taken != nil:
		w.Carry, w.CarryFrom = ws, taken.Addr
		w.Reasons = append(w.Reasons, because(ReasonCarryTaken, imageWords(ap, "paths", strings.Join(ws, ", "), "snapshot", taken.Addr)...))
	default:
		for _, dep := range w.Object.DependsOn {
			if d := changes[dep]; d != nil && d.Kind != kindImage && (d.Action == Replace || d.Action == Create) {
				// Its network goes first, so the old workload cannot
				// stay beside the new one. (A built image is tagged by
				// its content: the new one is made before the old goes.)
				w.Reasons = append(w.Reasons, because(ReasonCarryBlocked, "paths", strings.Join(ws, ", "), "dependency", dep, "action", pastTense(d.Action)))
				return
			}
		}
		w.Carry = ws
		w.Reasons = append(w.Reasons, because(ReasonCarryCurrent, imageWords(ap, "paths", strings.Join(ws, ", "))...))
	}
}
