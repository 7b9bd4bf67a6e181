package drivers

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestLineagePrefix(t *testing.T) {
	for _, tt := range []struct{ lineage, want string }{
		{"0F1E2D3C-4B5A-6978-8796-a5b4c3d2e1f0", "0f1e2d3c"},
		{"0f1e-2d3c-4b5a", "0f1e2d3c"}, // dashes are skipped, not counted
		{"abc", "abc"},
		{"", ""},
	} {
		if got := LineagePrefix(tt.lineage); got != tt.want {
			t.Errorf("LineagePrefix(%q) = %q, want %q", tt.lineage, got, tt.want)
		}
	}
}

func TestConfigString(t *testing.T) {
	block := cty.ObjectVal(map[string]cty.Value{"host": cty.StringVal("unix:///x.sock"), "pool": cty.NullVal(cty.String)})
	for _, tt := range []struct {
		name    string
		cfg     cty.Value
		attr    string
		want    string
		wantErr bool
	}{
		{"set", block, "host", "unix:///x.sock", false},
		{"null attribute", block, "pool", "", false},
		{"no such attribute", block, "other", "", false},
		{"no block", cty.NilVal, "host", "", false},
		{"null block", cty.NullVal(block.Type()), "host", "", false},
		{"unknown block", cty.UnknownVal(block.Type()), "host", "", true},
	} {
		got, err := ConfigString(tt.cfg, tt.attr)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%s: ConfigString = %q, %v; want %q (error %t)", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}
