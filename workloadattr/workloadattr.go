// Package workloadattr is the one table of the plain attributes of a
// workload (an agent or sidecar block): each row's name, the type drivers
// receive it as, and what it means. lang derives its decode spec and
// checks' order from the rows, drivers the workload value type and the
// list a driver's declaration is checked against. A new attribute is a
// row here, a check in lang when it needs one, one mapping per driver that
// supports it (listed in that driver's Capabilities.Attributes; every
// other driver's validate refuses it at its line), and the README.
//
// The nested blocks (build, egress, healthcheck, credential) are not
// rows: each has its own capability.
//
// It imports no bottlefile package, so both lang and drivers can.
package workloadattr

import "github.com/zclconf/go-cty/cty"

// Row is one plain workload attribute.
type Row struct {
	Name string
	// Type is the attribute's type as drivers receive it, after lang's
	// checks (memory: a number of bytes).
	Type cty.Type
	// Example is a valid value of Type, for tests that set every
	// attribute.
	Example cty.Value
	Doc     string
}

// Rows are the plain workload attributes, in the order they are decoded.
var Rows = []Row{
	{"image", cty.String, cty.StringVal("alpine:3"), "image reference (or null when a build block is set)"},
	{"command", cty.List(cty.String), cty.ListVal([]cty.Value{cty.StringVal("true")}), "the workload's command"},
	{"entrypoint", cty.List(cty.String), cty.ListVal([]cty.Value{cty.StringVal("/bin/sh")}), "the workload's entrypoint"},
	{"env", cty.Map(cty.String), cty.MapVal(map[string]cty.Value{"A": cty.StringVal("b")}), "environment variables"},
	{"workdir", cty.String, cty.StringVal("/tmp"), "working directory (absolute)"},
	{"user", cty.String, cty.StringVal("nobody"), "user the workload runs as"},
	{"cpus", cty.Number, cty.NumberIntVal(1), "CPU limit"},
	{"memory", cty.Number, cty.NumberIntVal(64 << 20), "memory limit in bytes"},
	{"pids", cty.Number, cty.NumberIntVal(64), "how many processes (threads included) may run at once"},
	{"labels", cty.Map(cty.String), cty.MapVal(map[string]cty.Value{"a": cty.StringVal("b")}), "extra labels"},
}

// Names are the rows' names, in order.
func Names() []string {
	out := make([]string, len(Rows))
	for i, r := range Rows {
		out[i] = r.Name
	}
	return out
}

// Lookup is the row named name.
func Lookup(name string) (Row, bool) {
	for _, r := range Rows {
		if r.Name == name {
			return r, true
		}
	}
	return Row{}, false
}

// The types of the nested blocks, as drivers receive them, each spelled
// once here for lang (which makes these values) and drivers (which
// decode them).
var (
	// BuildType is a build block: the absolute context directory and the
	// Dockerfile's name in it.
	BuildType = cty.Object(map[string]cty.Type{"context": cty.String, "dockerfile": cty.String})
	// HealthcheckType is a healthcheck block with its defaults filled in,
	// durations in Go's canonical form.
	HealthcheckType = cty.Object(map[string]cty.Type{
		"command":      cty.List(cty.String), // the argv, run without a shell
		"interval":     cty.String,
		"timeout":      cty.String,
		"retries":      cty.Number,
		"start_period": cty.String,
	})
	// CredentialType is one credential of an egress block; value is
	// sensitive.
	CredentialType = cty.Object(map[string]cty.Type{
		"name":   cty.String,
		"host":   cty.String,
		"port":   cty.Number,
		"header": cty.String, // lower case
		"prefix": cty.String, // "" for none
		"value":  cty.String,
		"env":    cty.String, // "" for none
	})
)
