package policy

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/egress"
)

// TestParse reads each fixture of testdata: a valid policy gives its
// ceiling in canonical form (nil: none, []: nothing allowed); an invalid
// one an error naming the file and the line at fault.
func TestParse(t *testing.T) {
	tests := []struct {
		file    string
		ceiling []string // want, when valid
		none    bool     // no ceiling at all
		errLine int      // want an error on this line
		errText string   // ... whose summary or detail holds this
	}{
		{file: "valid.hcl", ceiling: []string{"api.anthropic.com:443", "*.github.com:443", "10.0.0.0/8:5432"}},
		{file: "valid.json", ceiling: []string{"api.anthropic.com:443", "*.github.com:443"}},
		{file: "nothing.hcl", ceiling: []string{}},
		{file: "unset.hcl", none: true},
		{file: "syntax.hcl", errLine: 3, errText: "Missing item separator"},
		{file: "bad-rule.hcl", errLine: 3, errText: `invalid egress rule "https://github.com/"`},
		{file: "unknown-attr.hcl", errLine: 2, errText: `An argument named "egress_allow" is not expected here`},
		{file: "not-list.hcl", errLine: 1, errText: "must be a list of egress rules"},
		{file: "variable.hcl", errLine: 1, errText: "Variables not allowed"},
		{file: "null-rule.hcl", errLine: 1, errText: "is null"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pol, diags := Parse(path, data)
			if tt.errText != "" {
				if !diags.HasErrors() {
					t.Fatalf("no error; policy %+v", pol)
				}
				d := diags[0]
				if !strings.Contains(d.Summary+" "+d.Detail, tt.errText) {
					t.Errorf("error %q: %q, want it to say %q", d.Summary, d.Detail, tt.errText)
				}
				if !strings.Contains(d.Detail, path) || d.Subject == nil || d.Subject.Filename != path {
					t.Errorf("error does not name the policy file %s: %q (subject %v)", path, d.Detail, d.Subject)
				}
				if d.Subject != nil && d.Subject.Start.Line != tt.errLine {
					t.Errorf("error on line %d, want %d", d.Subject.Start.Line, tt.errLine)
				}
				if pol != nil {
					t.Errorf("a policy from an invalid file: %+v", pol)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatalf("unexpected error: %s", diags.Error())
			}
			if pol.Source != path {
				t.Errorf("source %q, want %q", pol.Source, path)
			}
			if tt.none {
				if pol.HasCeiling() || pol.CeilingStrings() != nil {
					t.Errorf("ceiling %q, want none", pol.CeilingStrings())
				}
				return
			}
			if !pol.HasCeiling() {
				t.Fatal("no ceiling")
			}
			if got := pol.CeilingStrings(); !slices.Equal(got, tt.ceiling) {
				t.Errorf("ceiling %q, want %q", got, tt.ceiling)
			}
			if len(pol.Ranges) != len(pol.Ceiling) {
				t.Errorf("%d ranges for %d rules", len(pol.Ranges), len(pol.Ceiling))
			}
		})
	}
}

// TestLocate: $BOTTLEFILE_POLICY first (and it must exist), then the
// user's config directory, then the system path; none at all is no policy.
func TestLocate(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		exists  []string
		denied  []string // exist, but cannot be read
		want    string
		wantErr string
	}{
		{name: "none", env: map[string]string{"HOME": "/home/u"}},
		{name: "env", env: map[string]string{EnvVar: "/srv/p.hcl", "HOME": "/home/u"}, exists: []string{"/srv/p.hcl", SystemPath}, want: "/srv/p.hcl"},
		{name: "env missing", env: map[string]string{EnvVar: "/srv/p.hcl"}, exists: []string{SystemPath}, wantErr: "BOTTLEFILE_POLICY=/srv/p.hcl cannot be read"},
		{name: "xdg", env: map[string]string{"XDG_CONFIG_HOME": "/cfg", "HOME": "/home/u"}, exists: []string{"/cfg/bottlefile/policy.hcl", "/home/u/.config/bottlefile/policy.hcl", SystemPath}, want: "/cfg/bottlefile/policy.hcl"},
		{name: "home", env: map[string]string{"HOME": "/home/u"}, exists: []string{"/home/u/.config/bottlefile/policy.hcl", SystemPath}, want: "/home/u/.config/bottlefile/policy.hcl"},
		{name: "relative xdg ignored", env: map[string]string{"XDG_CONFIG_HOME": "cfg", "HOME": "/home/u"}, exists: []string{"cfg/bottlefile/policy.hcl", "/home/u/.config/bottlefile/policy.hcl"}, want: "/home/u/.config/bottlefile/policy.hcl"},
		{name: "system", env: map[string]string{"HOME": "/home/u"}, exists: []string{SystemPath}, want: SystemPath},
		{name: "unreadable user file is not skipped", env: map[string]string{"HOME": "/home/u"}, denied: []string{"/home/u/.config/bottlefile/policy.hcl"}, exists: []string{SystemPath}, wantErr: "/home/u/.config/bottlefile/policy.hcl cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stat := func(p string) (fs.FileInfo, error) {
				switch {
				case slices.Contains(tt.exists, p):
					return nil, nil
				case slices.Contains(tt.denied, p):
					return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrPermission}
				}
				return nil, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
			}
			got, err := Locate(func(k string) string { return tt.env[k] }, stat)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Locate = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLoad reads the file $BOTTLEFILE_POLICY names.
func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.hcl")
	if err := os.WriteFile(path, []byte(`egress_ceiling = ["api.anthropic.com:443"]`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvVar, path)
	pol, diags := Load()
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if pol.Source != path || !slices.Equal(pol.CeilingStrings(), []string{"api.anthropic.com:443"}) {
		t.Errorf("Load = %+v", pol)
	}
	t.Setenv(EnvVar, path+".missing")
	if _, diags := Load(); !diags.HasErrors() {
		t.Error("a missing policy named by BOTTLEFILE_POLICY is no error")
	}
}

// TestUncovered: the ceiling bounds rules as an egress_ceiling does.
func TestUncovered(t *testing.T) {
	pol, diags := Parse("p.hcl", []byte(`egress_ceiling = ["*.github.com:443", "api.anthropic.com:443"]`))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	rules, err := egress.ParseRules([]string{"api.github.com:443", "api.anthropic.com", "0.0.0.0/0:443", "*.github.com:443"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range pol.Uncovered(rules) {
		got = append(got, r.String())
	}
	// api.anthropic.com without a port opens 80 too.
	if want := []string{"api.anthropic.com", "0.0.0.0/0:443"}; !slices.Equal(got, want) {
		t.Errorf("Uncovered = %q, want %q", got, want)
	}
	var none *Policy
	if none.Uncovered(rules) != nil || none.HasCeiling() {
		t.Error("no policy bounds something")
	}
}
