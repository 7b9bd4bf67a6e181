package planner

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/bottlefile/bottlefile/units"
)

// ReasonCode names a kind of reason: why an action not driven by the
// configuration is planned (drift, an interrupted apply, a policy).
type ReasonCode string

// Reason is one reason of a change: its kind and its parameters (an
// address, a runtime, a size), from which each view writes its sentence.
// Text is the English sentence the human and Markdown plans print.
type Reason struct {
	Code   ReasonCode        `json:"code"`
	Params map[string]string `json:"params,omitempty"`
	// Cause is the reason this one follows from, written in its {cause}
	// ("this replace discards 1.2 MiB ...; no snapshot_policy covers ...").
	Cause *Reason `json:"cause,omitempty"`
}

// reasonKind is a row of the table of reason kinds: the sentence, with
// {name} for a parameter, {name:q} for one quoted as Go quotes it, and
// {?name:text with %s} for text only when the parameter is set; and
// whether the change discards what a workload wrote (a pull request
// reviewer must see those first).
type reasonKind struct {
	text         string
	discardsWork bool
}

// The reason kinds. Params named in each text.
const (
	ReasonText ReasonCode = "text" // a sentence from a plan file of version 1: {text}

	ReasonReplaceRequested  ReasonCode = "replace-requested"
	ReasonGone              ReasonCode = "gone"
	ReasonGoneRecreate      ReasonCode = "gone-recreate"
	ReasonMoved             ReasonCode = "moved"
	ReasonLeftover          ReasonCode = "leftover"
	ReasonLeftoverUnnamed   ReasonCode = "leftover-unnamed"
	ReasonTwin              ReasonCode = "twin"
	ReasonStray             ReasonCode = "stray"
	ReasonLeftoverSnapshot  ReasonCode = "leftover-snapshot"
	ReasonRefreshOnlyAdopt  ReasonCode = "refresh-only-adopt"
	ReasonLeftoverUnready   ReasonCode = "leftover-unready"
	ReasonLeftoverMismatch  ReasonCode = "leftover-mismatch"
	ReasonAdoptLeftover     ReasonCode = "adopt-leftover"
	ReasonAdoptReplaced     ReasonCode = "adopt-replaced"
	ReasonMigrate           ReasonCode = "migrate"
	ReasonRuntimeChanged    ReasonCode = "runtime-changed"
	ReasonLiveUnready       ReasonCode = "live-unready"
	ReasonRecreatedOutside  ReasonCode = "recreated-outside"
	ReasonDriftReplace      ReasonCode = "drift-replace"
	ReasonConfigDriftUpdate ReasonCode = "config-drift-update"
	ReasonConfigDrift       ReasonCode = "config-drift"
	ReasonHashDiffers       ReasonCode = "hash-differs"
	ReasonRestartedRecorded ReasonCode = "restarted-recorded"
	ReasonStopped           ReasonCode = "stopped"
	ReasonExited            ReasonCode = "exited"
	ReasonStoppedUpdate     ReasonCode = "stopped-update"
	ReasonExitedUpdate      ReasonCode = "exited-update"
	ReasonPreventDestroy    ReasonCode = "prevent-destroy"
	ReasonDependsReplaced   ReasonCode = "depends-replaced"
	ReasonDependsRecreated  ReasonCode = "depends-recreated"

	ReasonSnapshotBefore     ReasonCode = "snapshot-before"
	ReasonSnapshotMigrate    ReasonCode = "snapshot-migrate"
	ReasonSnapshotTake       ReasonCode = "snapshot-take"
	ReasonSnapshotEvery      ReasonCode = "snapshot-every"
	ReasonIdleStop           ReasonCode = "idle-stop"
	ReasonSnapshotFirst      ReasonCode = "snapshot-first"
	ReasonDiscards           ReasonCode = "discards"
	ReasonDiscardsUnmeasured ReasonCode = "discards-unmeasured"
	ReasonKeepLast           ReasonCode = "keep-last"
	ReasonMaxAge             ReasonCode = "max-age"
	ReasonMaxTotalSize       ReasonCode = "max-total-size"
	ReasonPinMissing         ReasonCode = "pin-missing"
	ReasonPinRemoved         ReasonCode = "pin-removed"
	ReasonBootsTaken         ReasonCode = "boots-taken"
	ReasonBootsPinned        ReasonCode = "boots-pinned"
	ReasonResumes            ReasonCode = "resumes"
	ReasonBootsFrom          ReasonCode = "boots-from"
	ReasonSnapshotLost       ReasonCode = "snapshot-lost"
	ReasonSnapshotRetaken    ReasonCode = "snapshot-retaken"
	ReasonSnapshotLostAgent  ReasonCode = "snapshot-lost-agent"

	ReasonCarrySnapshot   ReasonCode = "carry-snapshot"
	ReasonCarryMigrate    ReasonCode = "carry-migrate"
	ReasonCarryTaken      ReasonCode = "carry-taken"
	ReasonCarryBlocked    ReasonCode = "carry-blocked"
	ReasonCarryCurrent    ReasonCode = "carry-current"
	ReasonResumeOldImage  ReasonCode = "resume-old-image"
	ReasonRestartNoResume ReasonCode = "restart-no-resume"
	ReasonRestartPinned   ReasonCode = "restart-pinned"
	ReasonRestartNoNewer  ReasonCode = "restart-no-newer"
	ReasonRestartResumed  ReasonCode = "restart-resumed"
	ReasonRestartLost     ReasonCode = "restart-lost"
	ReasonRestartReplaced ReasonCode = "restart-replaced"

	ReasonPolicyRecorded    ReasonCode = "policy-recorded"
	ReasonSnapshotFirstGone ReasonCode = "snapshot-first-removed"
	ReasonRemovedDestroy    ReasonCode = "removed-destroy"
	ReasonRemovedNoKeep     ReasonCode = "removed-no-keep"
	ReasonIntent            ReasonCode = "intent"
	ReasonForceRemoveInUse  ReasonCode = "force-remove-in-use"
	ReasonIncludeSnapshots  ReasonCode = "include-snapshots"
	ReasonRemovedNoPolicy   ReasonCode = "removed-no-policy"
	ReasonRemovedNoDestroy  ReasonCode = "removed-no-destroy"
	ReasonSidecarNoSnapshot ReasonCode = "sidecar-no-snapshot"
	ReasonPolicyNotCovered  ReasonCode = "policy-not-covered"

	ReasonArchive           ReasonCode = "archive"
	ReasonArchiveSnapshot   ReasonCode = "archive-snapshot"
	ReasonArchiveFinish     ReasonCode = "archive-finish"
	ReasonArchivedChanged   ReasonCode = "archived-changed"
	ReasonArchiveResume     ReasonCode = "archive-resume"
	ReasonArchiveResumes    ReasonCode = "archive-resumes"
	ReasonArchivedForget    ReasonCode = "archived-forget"
	ReasonArchiveNoSnapshot ReasonCode = "archive-no-snapshot"
)

// reasonKinds is the one table of reason kinds.
var reasonKinds = map[ReasonCode]reasonKind{
	ReasonText: {text: "{text}"},

	ReasonArchive:           {text: "{agent} is archived: its filesystem is kept in {snapshot}, and its workloads and networks are removed until start, exec or an apply that changes it resumes it"},
	ReasonArchiveSnapshot:   {text: "archive: {agent}'s filesystem is committed before its workloads are removed"},
	ReasonArchiveFinish:     {text: "an archive of {agent} was cut off before it removed this: it is archived like the rest"},
	ReasonArchivedChanged:   {text: "it is archived, and its configuration changed: {agent} is resumed"},
	ReasonArchiveResume:     {text: "{agent} is archived{?at: (since %s)} and is resumed{?what: for %s}"},
	ReasonArchiveResumes:    {text: "it resumes from {snapshot}, where it was archived{?at: on %s}"},
	ReasonArchivedForget:    {text: "it is archived: only its record is removed"},
	ReasonArchiveNoSnapshot: {text: "{agent} is archived, but its archive snapshot {snapshot} is gone: it starts from its image"},

	ReasonReplaceRequested:  {text: "replacement was requested with -replace"},
	ReasonGone:              {text: "it no longer exists on the runtime; only its record is removed"},
	ReasonGoneRecreate:      {text: "it was recorded as {id} but no longer exists on the runtime (deleted outside bottlefile, or by a run cut off before it updated the state)"},
	ReasonMoved:             {text: "{?from:%s has moved to }{addr}{!from: has moved}{?from_runtime: from runtime {from_runtime:q} to runtime {runtime:q} (the same engine)}"},
	ReasonLeftover:          {text: "{kind} {name} carries this state's lineage but is not recorded (left by an interrupted apply)"},
	ReasonLeftoverUnnamed:   {text: "{kind} {name} carries this state's lineage and no record can name it: it is {leftover}; it is removed by its id"},
	ReasonTwin:              {text: "{kind} {name} ({id}) is a second {kind} of this name carrying this state's lineage, left by an interrupted create; it is removed by its id"},
	ReasonStray:             {text: "{kind} {name} on runtime {runtime:q} carries this state's lineage but is not recorded there (left by an interrupted migration)"},
	ReasonLeftoverSnapshot:  {text: "snapshot image {name} carries this state's lineage but is not recorded: an apply was cut off after taking it and before recording it. Nothing was removed after it, so what it holds is still in the agent; it is removed, and the policy takes a new snapshot when it asks"},
	ReasonRefreshOnlyAdopt:  {text: "it carries this state's lineage, matches the configuration and is not recorded; -refresh-only records it and does not start it"},
	ReasonLeftoverUnready:   {text: "{kind} {name} carries this state's lineage but is not recorded, and the apply that made it was cut off before it was ready"},
	ReasonLeftoverMismatch:  {text: "{kind} {name} carries this state's lineage but is not recorded (left by an interrupted apply), and does not match the configuration"},
	ReasonAdoptLeftover:     {text: "{kind} {name} carries this state's lineage but is not recorded (left by an interrupted apply); it matches the configuration" + adoptText},
	ReasonAdoptReplaced:     {text: "the live {kind} {id} is not the recorded {recorded}; it carries this state's lineage and matches the configuration (an interrupted apply made it)" + adoptText},
	ReasonMigrate:           {text: "its runtime changes from {from:q} to {to:q}: a snapshot on {from:q} moves to {to:q}, the workload is created there from it and checked to run, then removed from {from:q}"},
	ReasonRuntimeChanged:    {text: "it moves from runtime {from:q} to {to:q}"},
	ReasonLiveUnready:       {text: "the live {kind} {id} is not the recorded {recorded}; the apply that made it was cut off before it was ready"},
	ReasonRecreatedOutside:  {text: "the live {kind} is {id}, not the recorded {recorded} (re-created outside bottlefile)"},
	ReasonDriftReplace:      {text: "{drift}; it will be replaced to match the configuration"},
	ReasonConfigDriftUpdate: {text: "{drift}; apply writes them again, in place"},
	ReasonConfigDrift:       {text: "{drift}"},
	ReasonHashDiffers:       {text: "its recorded configuration hash differs from the desired one"},
	ReasonRestartedRecorded: {text: restartedText + "; the new task is recorded"},
	ReasonStopped:           {text: "it was stopped outside bottlefile{?at: (code {code} at %s)}; it will be started, not replaced"},
	ReasonExited:            {text: "it {exit}{?last: after printing %s}; it will be started again, not replaced"},
	ReasonStoppedUpdate:     {text: "it was stopped outside bottlefile{?at: (code {code} at %s)}; it will be started once updated in place"},
	ReasonExitedUpdate:      {text: "it {exit}{?last: after printing %s}; it will be started once updated in place"},
	ReasonPreventDestroy:    {text: "lifecycle.prevent_destroy changes to {value}; only the record changes"},
	ReasonDependsReplaced:   {text: "{dependency}, which it depends on, will be {action}"},
	ReasonDependsRecreated:  {text: "{dependency}, which it depends on, was re-created after it"},

	ReasonSnapshotBefore:     {text: "snapshot_policy.before includes {covered:q}: {agent}'s filesystem is committed before it is {action}"},
	ReasonSnapshotMigrate:    {text: "{agent}'s filesystem is committed on runtime {from:q} and moved to {to:q} (migration)"},
	ReasonSnapshotTake:       {text: "snapshot take: {agent}'s filesystem is committed now"},
	ReasonSnapshotEvery:      {text: "snapshot_policy.every = {every:q}: {agent} was last snapshotted or created {since} ago"},
	ReasonIdleStop:           {text: "idle.stop_after = {stop_after:q}: {agent} has not been used for {idle}"},
	ReasonSnapshotFirst:      {text: "{snapshot} is taken first (snapshot_policy)"},
	ReasonDiscards:           {text: "this {covered} discards {written_bytes:bytes} written inside it{?since: since %s}; {cause}", discardsWork: true},
	ReasonDiscardsUnmeasured: {text: "this {covered} discards whatever was written inside it{?since: since %s} (not measured: {unmeasured}); {cause}", discardsWork: true},
	ReasonKeepLast:           {text: "snapshot_policy.keep_last = {keep_last}, and {keep_last} newer snapshots are kept"},
	ReasonMaxAge:             {text: "it is older than snapshot_policy.max_age ({max_age}, taken {taken})"},
	ReasonMaxTotalSize:       {text: "snapshot_policy.max_total_size = {max_total_size_bytes:bytes}: the agent's snapshots total {total_bytes:bytes}{?taken_bytes:, and about {taken_bytes:bytes} more with {taken} (what its workload wrote)}{?taken:{!taken_bytes:, and more with %s}}; the oldest go first"},
	ReasonPinMissing:         {text: "from_snapshot names {snapshot}, but it is not in the state (bottlefile snapshot list shows the snapshots there are); it starts from its image"},
	ReasonPinRemoved:         {text: "from_snapshot names {snapshot}, but this plan removes it: {removal}; it starts from its image"},
	ReasonBootsTaken:         {text: "it boots from {snapshot}, taken just before"},
	ReasonBootsPinned:        {text: "it boots from {snapshot} (from_snapshot){?of:, a snapshot of %s}{?first:, taken first}{?taken:, taken %s}"},
	ReasonResumes:            {text: "it resumes from {snapshot}, taken {taken} (set resume = false to start from the image)"},
	ReasonBootsFrom:          {text: "it boots from {snapshot}"},
	ReasonSnapshotLost:       {text: "its image is gone from the runtime (deleted outside bottlefile, or by a run cut off before it updated the state); only its record is removed"},
	ReasonSnapshotRetaken:    {text: "its image is gone from the runtime (deleted outside bottlefile, or by a run cut off before it updated the state); it is taken again from {agent}, which is running"},
	ReasonSnapshotLostAgent:  {text: "its image is gone from the runtime (deleted outside bottlefile, or by a run cut off before it updated the state), and {agent} has no running workload to take it again from; only its record is removed"},

	ReasonCarrySnapshot:   {text: "it boots " + imageText + " with {paths} from {snapshot}{?just_before:, taken just before}{?image_unknown: (the image that snapshot was taken of is not known, so only the workspace is taken from it)}"},
	ReasonCarryMigrate:    {text: "its image changed: it boots " + imageText + " with {paths} from {snapshot}"},
	ReasonCarryTaken:      {text: "it boots " + imageText + " with {paths} from {snapshot}, taken just before"},
	ReasonCarryBlocked:    {text: "{paths} cannot be carried over from the current workload, because {dependency} is {action} too; add snapshot_policy { before = [\"replace\"] } to carry it from a snapshot"},
	ReasonCarryCurrent:    {text: "it boots " + imageText + " with {paths} carried over from the current workload, which is stopped and set aside until the new one has them, then removed (what it wrote elsewhere is not kept)"},
	ReasonResumeOldImage:  {text: "its image changed, but it resumes from {snapshot}, so " + imageText + " is not used: declare workspace = [\"/workspace\", ...] on the agent to boot the new image with those paths carried over from {snapshot}, or set resume = false to boot the new image without them"},
	ReasonRestartNoResume: {text: restartedText + "; what it wrote{?lost_node: on %s} is lost, and resume = false: the new task is recorded"},
	ReasonRestartPinned:   {text: restartedText + "; what it wrote{?lost_node: on %s} is lost; it boots from {snapshot} (from_snapshot), as the new task did, which is recorded"},
	ReasonRestartNoNewer:  {text: restartedText + "; no snapshot of it is newer than what it booted from, so what it wrote{?lost_node: on %s} is lost and the new task is recorded"},
	ReasonRestartResumed:  {text: restartedText + "; it will be resumed from {snapshot}, taken {taken}"},
	ReasonRestartLost:     {text: "what it wrote{?lost_node: on %s} after {snapshot} was taken is lost with that task"},
	ReasonRestartReplaced: {text: "the new task, started {started}, is replaced"},

	ReasonPolicyRecorded:    {text: "its snapshot_policy changed, and is recorded: removing its block keeps what the recorded policy keeps; only the record changes"},
	ReasonSnapshotFirstGone: {text: "{snapshot} is taken first (the snapshot_policy it was applied with)"},
	ReasonRemovedDestroy:    {text: "{agent}{?block: is no longer an instance of %s}{!block:'s block was removed}, and the snapshot_policy it was applied with includes \"destroy\": its filesystem is committed before it is destroyed, and its snapshots are kept"},
	ReasonRemovedNoKeep:     {text: "{agent}{?block: is no longer an instance of %s}{!block:'s block was removed}, and the snapshot_policy it was applied with does not keep snapshots across destroy"},
	ReasonIntent:            {text: "an apply cut off at {at} was creating {what} and the runtime shows none: it is created now, and one that lands late is taken over, not refused"},
	ReasonForceRemoveInUse:  {text: "-force: this is data loss: {users}, and none of it can be created from this snapshot again", discardsWork: true},
	ReasonIncludeSnapshots:  {text: "-include-snapshots deletes its snapshots too"},
	ReasonRemovedNoPolicy:   {text: "{?block:it is no longer an instance of %s}{!block:its block was removed}, and it was applied with no snapshot_policy"},
	ReasonRemovedNoDestroy:  {text: "{?block:it is no longer an instance of %s}{!block:its block was removed}, and the snapshot_policy it was applied with does not include \"destroy\""},
	ReasonSidecarNoSnapshot: {text: "a sidecar is in no snapshot (snapshot_policy commits only the agent)"},
	ReasonPolicyNotCovered:  {text: "no snapshot_policy covers {covered:q}"},
}

// adoptText ends a reason for adopting a live object: recorded as it is,
// or started first ({exit}: how it exited; {start}: set when it is
// started).
const adoptText = "{?exit:, but it %s: it will be started and recorded, not replaced}{?never_started:, but it was never started: it will be started and recorded, not replaced}{!start: and will be recorded}"

// restartedText starts the reasons about a workload the cluster restarted.
const restartedText = "{addr} was restarted by the cluster{?node: on %s} from {?boot_from:%s}{!boot_from:its image}{?restart_cause: (%s)}"

// imageText names the image a workload boots: {image}, or the one built
// from the directory {build}.
const imageText = "{?image:image %s}{?build:the image built from ./%s}{!image:{!build:its new image}}"

// because makes a reason of kind code; kv are its parameters, name then
// value.
func because(code ReasonCode, kv ...string) Reason {
	r := Reason{Code: code}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue // unset: a view leaves out what it would say
		}
		if r.Params == nil {
			r.Params = map[string]string{}
		}
		r.Params[kv[i]] = kv[i+1]
	}
	return r
}

// NewReason makes a reason of kind code, for the operations that add one
// to a plan; kv are its parameters, name then value.
func NewReason(code ReasonCode, kv ...string) Reason { return because(code, kv...) }

// set sets parameter k of r to v; an empty v leaves it unset.
func (r *Reason) set(k, v string) {
	if v == "" {
		return
	}
	if r.Params == nil {
		r.Params = map[string]string{}
	}
	r.Params[k] = v
}

// TextReason is a reason that is only a sentence (a plan file of version 1
// holds no more).
func TextReason(s string) Reason { return because(ReasonText, "text", s) }

// DiscardsWork reports whether the change the reason is given for loses
// what a workload wrote.
func (r Reason) DiscardsWork() bool { return reasonKinds[r.Code].discardsWork }

// Text is the reason in English, as the human and Markdown plans print it.
func (r Reason) Text() string {
	k, ok := reasonKinds[r.Code]
	if !ok {
		return string(r.Code) // a code of a newer bottlefile: its name
	}
	params := r.Params
	if r.Cause != nil {
		params = maps.Clone(params)
		if params == nil {
			params = map[string]string{}
		}
		params["cause"] = r.Cause.Text()
	}
	return expand(k.text, params)
}

func (r Reason) String() string { return r.Text() }

// expand fills a reason's text: {name}, {name:q}, {name:bytes} (a number of
// bytes, as "2.9 KiB"), {?name:...%s...} (only when set), {!name:...} (only
// when not set).
func expand(text string, params map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '{')
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i])
		text = text[i:]
		end := closing(text)
		if end < 0 {
			b.WriteString(text)
			return b.String()
		}
		field := text[1:end]
		text = text[end+1:]
		switch {
		case strings.HasPrefix(field, "?"):
			name, body, _ := strings.Cut(field[1:], ":")
			if v := params[name]; v != "" {
				b.WriteString(strings.ReplaceAll(expand(body, params), "%s", v))
			}
		case strings.HasPrefix(field, "!"):
			name, body, _ := strings.Cut(field[1:], ":")
			if params[name] == "" {
				b.WriteString(expand(body, params))
			}
		case strings.HasSuffix(field, ":bytes"):
			// A size in bytes, a parameter as programs read it, in binary
			// units as people do.
			n, err := strconv.ParseInt(params[strings.TrimSuffix(field, ":bytes")], 10, 64)
			if err != nil {
				b.WriteString(params[strings.TrimSuffix(field, ":bytes")])
			} else {
				b.WriteString(units.FormatBytes(n))
			}
		case strings.HasSuffix(field, ":q"):
			fmt.Fprintf(&b, "%q", params[strings.TrimSuffix(field, ":q")])
		case strings.ContainsAny(field, " \"=["):
			b.WriteString("{" + field + "}") // a literal brace, as in snapshot_policy { ... }
		default:
			b.WriteString(params[field])
		}
	}
}

// closing is the index of the brace that closes the one s starts with.
func closing(s string) int {
	depth := 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// ReasonTexts are the reasons' sentences.
func ReasonTexts(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Text()
	}
	return out
}

// UnmarshalJSON reads a reason as plan files of version 2 hold it, an
// object, or as those of version 1 did, a sentence.
func (r *Reason) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*r = TextReason(s)
		return nil
	}
	type plain Reason
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if p.Code == "" {
		return fmt.Errorf("a reason without a code")
	}
	*r = Reason(p)
	return nil
}
