package planner

import (
	"strings"
	"testing"
)

// TestReasonText: each kind's sentence, filled from its parameters, as the
// plan prints it; a parameter left out leaves out what it would say.
func TestReasonText(t *testing.T) {
	for _, tt := range []struct {
		r    Reason
		want string
	}{
		{because(ReasonStopped), "it was stopped outside bottlefile; it will be started, not replaced"},
		{because(ReasonStopped, "code", "137", "at", "2026-11-25 10:14 UTC"), "it was stopped outside bottlefile (code 137 at 2026-11-25 10:14 UTC); it will be started, not replaced"},
		{because(ReasonMoved, "addr", "agent.new", "from", "agent.old"), "agent.old has moved to agent.new"},
		{because(ReasonMoved, "addr", "agent.x", "from_runtime", "default", "runtime", "local"), `agent.x has moved from runtime "default" to runtime "local" (the same engine)`},
		{because(ReasonRuntimeChanged, "from", `a"b`, "to", "c"), `it moves from runtime "a\"b" to "c"`},
		{because(ReasonMaxTotalSize, "max_total_size_bytes", "4096", "total_bytes", "6000"), "snapshot_policy.max_total_size = 4.0 KiB: the agent's snapshots total 5.9 KiB; the oldest go first"},
		{because(ReasonMaxTotalSize, "max_total_size_bytes", "4096", "total_bytes", "6000", "taken", "agent.a.snapshot.4"), "snapshot_policy.max_total_size = 4.0 KiB: the agent's snapshots total 5.9 KiB, and more with agent.a.snapshot.4; the oldest go first"},
		{because(ReasonMaxTotalSize, "max_total_size_bytes", "4096", "total_bytes", "6000", "taken", "agent.a.snapshot.4", "taken_bytes", "3000"), "snapshot_policy.max_total_size = 4.0 KiB: the agent's snapshots total 5.9 KiB, and about 2.9 KiB more with agent.a.snapshot.4 (what its workload wrote); the oldest go first"},
		{because(ReasonCarryBlocked, "paths", "/workspace", "dependency", "agent.a.network", "action", "replaced"), `/workspace cannot be carried over from the current workload, because agent.a.network is replaced too; add snapshot_policy { before = ["replace"] } to carry it from a snapshot`},
		{because(ReasonCarryCurrent, "paths", "/w"), "it boots its new image with /w carried over from the current workload, which is stopped and set aside until the new one has them, then removed (what it wrote elsewhere is not kept)"},
		{because(ReasonAdoptLeftover, "kind", "container", "name", "x"), "container x carries this state's lineage but is not recorded (left by an interrupted apply); it matches the configuration and will be recorded"},
		{because(ReasonAdoptLeftover, "kind", "container", "name", "x", "start", "true", "never_started", "true"), "container x carries this state's lineage but is not recorded (left by an interrupted apply); it matches the configuration, but it was never started: it will be started and recorded, not replaced"},
		{Reason{Code: ReasonDiscards, Params: map[string]string{"covered": "replace", "written_bytes": "1048576"}, Cause: &Reason{Code: ReasonPolicyNotCovered, Params: map[string]string{"covered": "replace"}}},
			`this replace discards 1.0 MiB written inside it; no snapshot_policy covers "replace"`},
		{TextReason("a {sentence} of version 1"), "a {sentence} of version 1"},
		{Reason{Code: "from-a-newer-bottlefile"}, "from-a-newer-bottlefile"},
	} {
		if got := tt.r.Text(); got != tt.want {
			t.Errorf("%s %v:\n got %q\nwant %q", tt.r.Code, tt.r.Params, got, tt.want)
		}
	}
}

// TestReasonKinds: every row's sentence fills with no placeholder left,
// and only the kinds that say a change loses what a workload wrote are
// marked as data loss (the Markdown plan's "Review first").
func TestReasonKinds(t *testing.T) {
	loss := map[ReasonCode]bool{ReasonDiscards: true, ReasonDiscardsUnmeasured: true, ReasonForceRemoveInUse: true}
	for code, k := range reasonKinds {
		params := map[string]string{}
		for _, name := range []string{"text", "id", "addr", "from", "to", "kind", "name", "leftover", "runtime", "drift", "exit", "last", "value", "dependency", "action", "covered", "agent", "snapshot", "written", "since", "unmeasured", "keep_last", "max_age", "taken", "max_total_size_bytes", "total_bytes", "taken_bytes", "written_bytes", "removal", "of", "paths", "image", "started", "at", "what", "users", "code", "cause", "every", "idle", "stop_after"} {
			params[name] = "X"
		}
		got := Reason{Code: code, Params: params}.Text()
		if strings.Contains(strings.ReplaceAll(got, `{ before = ["replace"] }`, ""), "{") || strings.Contains(got, "%s") {
			t.Errorf("%s: a placeholder is left: %q", code, got)
		}
		if k.discardsWork != loss[code] {
			t.Errorf("%s: discardsWork = %v", code, k.discardsWork)
		}
	}
}
