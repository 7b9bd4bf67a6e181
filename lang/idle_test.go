package lang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEvalTimePolicies: snapshot_policy.every and the idle block evaluate
// to durations (days included), each alone or together; an agent without
// them has none.
func TestEvalTimePolicies(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantEvery time.Duration
		wantIdle  *IdleValue
	}{
		{"none", ``, 0, nil},
		{"every", `snapshot_policy {
    every     = "1h"
    keep_last = 24
  }`, time.Hour, nil},
		{"idle both", `idle {
    stop_after    = "30m"
    archive_after = "7d"
  }`, 0, &IdleValue{StopAfter: 30 * time.Minute, ArchiveAfter: 7 * 24 * time.Hour}},
		{"archive alone", `idle {
    archive_after = "${local.days}d"
  }`, 0, &IdleValue{ArchiveAfter: 3 * 24 * time.Hour}},
		{"stop alone with every", `snapshot_policy {
    every = "2s"
  }
  idle {
    stop_after = "3s"
  }`, 2 * time.Second, &IdleValue{StopAfter: 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cfg := load(t, map[string]string{"proj/Bottlefile": `
locals {
  days = 3
}
agent "coder" {
  image = "alpine:3"
  ` + tt.body + `
}
`})
			s, diags := cfg.NewScope(nil)
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			av, diags := s.EvalAgent(cfg.Agents["coder"])
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			var every time.Duration
			if av.SnapshotPolicy != nil {
				every = av.SnapshotPolicy.Every
			}
			if every != tt.wantEvery {
				t.Errorf("Every = %s, want %s", every, tt.wantEvery)
			}
			if diff := cmp.Diff(tt.wantIdle, av.Idle); diff != "" {
				t.Errorf("Idle (-want +got):\n%s", diff)
			}
		})
	}
}
