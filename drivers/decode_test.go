package drivers

import (
	"fmt"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestDecoders pins what Strings, StringMap, String, Int and Float say of
// each kind of value: null is the zero value, unknown (wholly or in part)
// and the wrong type are errors, a sensitive mark is no obstacle.
func TestDecoders(t *testing.T) {
	show := func(v any, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("%#v", v)
	}
	decoders := map[string]func(cty.Value) string{
		"Strings":   func(v cty.Value) string { return show(Strings(v)) },
		"StringMap": func(v cty.Value) string { return show(StringMap(v)) },
		"String":    func(v cty.Value) string { return show(String(v)) },
		"Int":       func(v cty.Value) string { return show(Int(v)) },
		"Float":     func(v cty.Value) string { return show(Float(v)) },
	}
	list := cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})
	for _, tt := range []struct {
		decoder string
		v       cty.Value
		want    string
	}{
		{"Strings", list, `[]string{"a", "b"}`},
		{"Strings", list.Mark("sensitive"), `[]string{"a", "b"}`},
		{"Strings", cty.NullVal(cty.List(cty.String)), `[]string(nil)`},
		{"Strings", cty.UnknownVal(cty.List(cty.String)), `error: value is not known yet`},
		{"Strings", cty.ListVal([]cty.Value{cty.UnknownVal(cty.String)}), `error: value is not known yet`},
		{"Strings", cty.StringVal("a"), `error: want a list of strings, got string`},
		{"Strings", cty.ListVal([]cty.Value{cty.NullVal(cty.String)}), `error: want a list of strings`},
		{"StringMap", cty.MapVal(map[string]cty.Value{"k": cty.StringVal("v")}), `map[string]string{"k":"v"}`},
		{"StringMap", cty.NullVal(cty.Map(cty.String)), `map[string]string(nil)`},
		{"StringMap", cty.MapVal(map[string]cty.Value{"k": cty.UnknownVal(cty.String)}), `error: value is not known yet`},
		{"StringMap", cty.True, `error: want a map of strings, got bool`},
		{"String", cty.StringVal("x").Mark("sensitive"), `"x"`},
		{"String", cty.NullVal(cty.String), `""`},
		{"String", cty.UnknownVal(cty.String), `error: value is not known yet`},
		{"String", cty.NumberIntVal(1), `error: want a string, got number`},
		{"String", list, `error: want a string, got list of string`},
		{"String", cty.ListVal([]cty.Value{cty.UnknownVal(cty.String)}), `error: want a string, got list of string`},
		{"Int", cty.NumberIntVal(7), `7`},
		{"Int", cty.NullVal(cty.Number), `0`},
		{"Int", cty.UnknownVal(cty.Number), `error: value is not known yet`},
		{"Int", cty.NumberFloatVal(1.5), `error: want a whole number`},
		{"Int", cty.StringVal("7"), `error: want a number, got string`},
		{"Float", cty.NumberFloatVal(1.5), `1.5`},
		{"Float", cty.NullVal(cty.Number), `0`},
		{"Float", cty.DynamicVal, `error: value is not known yet`},
		{"Float", cty.True, `error: want a number, got bool`},
	} {
		if got := decoders[tt.decoder](tt.v); got != tt.want {
			t.Errorf("%s(%#v) = %s, want %s", tt.decoder, tt.v, got, tt.want)
		}
	}
}

// TestStringsValue: a list Strings decodes back; none is an empty list,
// not null, so a planned attribute's hash does not tell nil from empty.
func TestStringsValue(t *testing.T) {
	for _, ss := range [][]string{{"a", "b"}, {}, nil} {
		v := StringsValue(ss)
		if v.IsNull() || !v.Type().Equals(cty.List(cty.String)) {
			t.Errorf("StringsValue(%#v) = %#v, want a list of strings", ss, v)
		}
		got, err := Strings(v)
		if err != nil || len(got) != len(ss) || fmt.Sprint(got) != fmt.Sprint(ss) {
			t.Errorf("Strings(StringsValue(%#v)) = %#v, %v", ss, got, err)
		}
	}
}

// TestHasEgressBlock: an egress block, empty or sensitive, is one; so may
// be an unknown one or an unknown workload; no block, or no workload, is
// none.
func TestHasEgressBlock(t *testing.T) {
	with := func(egress cty.Value) cty.Value {
		return MustWorkload(map[string]cty.Value{"image": cty.StringVal("alpine:3"), "egress": egress})
	}
	for _, tt := range []struct {
		name string
		w    cty.Value
		want bool
	}{
		{"rules", with(StringsValue([]string{"example.com"})), true},
		{"empty", with(StringsValue(nil)), true},
		{"sensitive", with(StringsValue([]string{"example.com"}).Mark("sensitive")), true},
		{"unknown", with(cty.UnknownVal(cty.List(cty.String))), true},
		{"unknown workload", cty.UnknownVal(WorkloadType), true},
		{"none", with(cty.NilVal), false},
		{"no workload", cty.NilVal, false},
	} {
		if got := HasEgressBlock(tt.w); got != tt.want {
			t.Errorf("%s: HasEgressBlock = %t, want %t", tt.name, got, tt.want)
		}
	}
}
