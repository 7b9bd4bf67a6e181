package smolvm

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
)

func TestConfigureVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		version string
		wantErr []string // substrings; none means accepted
	}{
		{"0.8.2", []string{"smolvm 0.8.2 is not supported", "1.8.0 or later", "machine names are flags since 1.0.2", "create --from honours egress flags since 1.8.0", "install.sh"}},
		{"1.7.9", []string{"smolvm 1.7.9 is not supported", "1.8.0 or later"}},
		{"1.8.0-rc1", []string{"smolvm 1.8.0-rc1 is not supported"}},
		{"1.8.0", nil},
		{"1.9.3", nil},
		{"1.23.0", nil},
		{"garbage", []string{"cannot read a version", `"smolvm garbage"`, "1.8.0 or later"}},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "FAKESMOLVM_VERSION="+tt.version)
			d := f.unconfigured(t)
			err := d.Configure(context.Background(), drivers.ConfigureRequest{
				Runtime: "vm",
				Config:  cty.ObjectVal(map[string]cty.Value{"binary": cty.StringVal(f.bin)}),
			})
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Configure: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Configure accepted smolvm %s", tt.version)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestConfigureChangesNothing checks that Configure runs --version and
// nothing else, and Plan no command at all.
func TestConfigureChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	d := f.driver(t)
	if got, want := f.calls(t), [][]string{{"--version"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Configure ran %q, want %q", got, want)
	}
	f.resetCalls(t)
	planOne(t, d, agentSpec("coder", "alpine:3"))
	if got := f.calls(t); len(got) != 0 {
		t.Errorf("Plan ran %q, want nothing", got)
	}
}

func TestConfigureMissingBinary(t *testing.T) {
	t.Run("path", func(t *testing.T) {
		t.Parallel()
		d := newFake(t).unconfigured(t)
		missing := filepath.Join(t.TempDir(), "smolvm")
		err := d.Configure(context.Background(), drivers.ConfigureRequest{
			Runtime: "vm",
			Config:  cty.ObjectVal(map[string]cty.Value{"binary": cty.StringVal(missing)}),
		})
		for _, want := range []string{missing, "does not exist", "curl -sSL https://smolmachines.com/install.sh | bash", "apt, yum or pacman packages"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Configure with a missing binary: error %v does not contain %q", err, want)
			}
		}
	})
	t.Run("directory", func(t *testing.T) {
		t.Parallel()
		d := newFake(t).unconfigured(t)
		err := d.Configure(context.Background(), drivers.ConfigureRequest{
			Config: cty.ObjectVal(map[string]cty.Value{"binary": cty.StringVal(t.TempDir())}),
		})
		if err == nil || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("Configure with a directory as binary: %v", err)
		}
	})
	t.Run("PATH", func(t *testing.T) {
		// Not parallel: it changes PATH.
		d := newFake(t).unconfigured(t)
		t.Setenv("PATH", t.TempDir())
		d.defaultBinary = DefaultBinary
		for _, cfg := range []cty.Value{cty.NilVal, cty.NullVal(cty.Object(map[string]cty.Type{"binary": cty.String}))} {
			err := d.Configure(context.Background(), drivers.ConfigureRequest{Runtime: "vm", Config: cfg})
			for _, want := range []string{"smolvm was not found on PATH", "install.sh", "set binary in the runtime block"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Configure without smolvm on PATH: error %v does not contain %q", err, want)
				}
			}
		}
		if _, err := d.Read(context.Background(), drivers.ReadRequest{Lineage: "x"}); err == nil || !strings.Contains(err.Error(), "not configured") {
			t.Errorf("Read on an unconfigured driver: %v", err)
		}
	})
}

// TestConfigureFindsSmolvmOnPATH checks the default binary, smolvm on
// PATH, with the fake standing in.
func TestConfigureFindsSmolvmOnPATH(t *testing.T) {
	f := newFake(t)
	t.Setenv("PATH", filepath.Dir(f.bin))
	d := f.unconfigured(t)
	d.defaultBinary = DefaultBinary
	if err := d.Configure(context.Background(), drivers.ConfigureRequest{Runtime: "vm"}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	if d.binary != f.bin {
		t.Errorf("binary = %q, want %q", d.binary, f.bin)
	}
	// A bare name in the runtime block is looked up on PATH too.
	err := d.Configure(context.Background(), drivers.ConfigureRequest{
		Config: cty.ObjectVal(map[string]cty.Value{"binary": cty.StringVal("smolvm")}),
	})
	if err != nil {
		t.Fatalf("Configure with binary = \"smolvm\": %v", err)
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	good := map[string]version{
		"smolvm 1.9.3\n":                {1, 9, 3, ""},
		"smolvm v1.10.1":                {1, 10, 1, ""},
		"smolvm 1.8.0-rc.2 (abc 2026)":  {1, 8, 0, "rc.2"},
		"smolvm 2.0.0+build5":           {2, 0, 0, ""},
		"  smolvm 0.8.2\nmore noise\n ": {0, 8, 2, ""},
	}
	for in, want := range good {
		got, err := parseVersion(in)
		if err != nil || got != want {
			t.Errorf("parseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1.9.3", "smolvm", "smolvm 1.9", "smolvmx 1.9.3", "smolvm 1.9.3x"} {
		if v, err := parseVersion(in); err == nil {
			t.Errorf("parseVersion(%q) = %v, want an error", in, v)
		}
	}
	order := []version{{0, 8, 2, ""}, {1, 7, 9, ""}, {1, 8, 0, "alpha"}, {1, 8, 0, "rc1"}, {1, 8, 0, ""}, {1, 8, 1, ""}, {1, 10, 0, ""}, {2, 0, 0, ""}}
	for i := range order {
		for j := range order {
			if got, want := order[i].Less(order[j]), i < j; got != want {
				t.Errorf("%s.Less(%s) = %v", order[i], order[j], got)
			}
		}
	}
}
