package command

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestIncludeSnapshotsArgs: -include-snapshots reaches the planner with
// destroy, and is refused where no destroy keeps snapshots.
func TestIncludeSnapshotsArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parse   func() (*planArgs, hcl.Diagnostics)
		include bool
		err     string
	}{
		{name: "destroy", parse: func() (*planArgs, hcl.Diagnostics) {
			a, diags := parseApplyArgs([]string{"-include-snapshots"}, true)
			return &a.planArgs, diags
		}, include: true},
		{name: "plan -destroy", parse: func() (*planArgs, hcl.Diagnostics) {
			a, diags := parsePlanArgs([]string{"-destroy", "-include-snapshots"})
			return a, diags
		}, include: true},
		{name: "apply", parse: func() (*planArgs, hcl.Diagnostics) {
			a, diags := parseApplyArgs([]string{"-include-snapshots"}, false)
			return &a.planArgs, diags
		}, include: true, err: "-include-snapshots needs -destroy"},
		{name: "saved plan", parse: func() (*planArgs, hcl.Diagnostics) {
			a, diags := parseApplyArgs([]string{"-include-snapshots", "plan.out"}, false)
			return &a.planArgs, diags
		}, include: true, err: "-include-snapshots cannot be used with a saved plan"},
		{name: "destroy without", parse: func() (*planArgs, hcl.Diagnostics) {
			a, diags := parseApplyArgs(nil, true)
			return &a.planArgs, diags
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, diags := tc.parse()
			var errs []string
			for _, d := range diags {
				errs = append(errs, d.Detail)
			}
			err := strings.Join(errs, "\n")
			if got := a.options().IncludeSnapshots; got != tc.include {
				t.Errorf("IncludeSnapshots = %t, want %t", got, tc.include)
			}
			if (tc.err == "") != (err == "") || !strings.Contains(err, tc.err) {
				t.Errorf("error %q, want %q", err, tc.err)
			}
		})
	}
}
