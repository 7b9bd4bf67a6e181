package lang

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
)

// An agent's driver block is decoded against the per-agent schema its
// runtime's driver declares, with the configuration's variables; a
// driver that declares none takes no driver block.
func TestEvalAgentDriver(t *testing.T) {
	_, cfg := load(t, map[string]string{
		"proj/Bottlefile": `
variable "pool" {
  default = "agents"
}
agent "placed" {
  image = "alpine:3"
  driver {
    placement = ["node.labels.pool==${var.pool}"]
  }
}
agent "plain" {
  image = "alpine:3"
}
`,
	})
	scope, diags := cfg.NewScope(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	placement := hcldec.ObjectSpec{"placement": &hcldec.AttrSpec{Name: "placement", Type: cty.List(cty.String)}}

	for _, tc := range []struct {
		agent, driver string
		spec          hcldec.ObjectSpec
		want          cty.Value // cty.NilVal: none
		wantErr       string
		wantLine      int
		offeredBy     func(string) []string // nil: no other driver is known
	}{
		{"placed", "swarm", placement, cty.ObjectVal(map[string]cty.Value{
			"placement": cty.ListVal([]cty.Value{cty.StringVal("node.labels.pool==agents")}),
		}), "", 0, nil},
		{"plain", "swarm", placement, cty.ObjectVal(map[string]cty.Value{
			"placement": cty.NullVal(cty.List(cty.String)),
		}), "", 0, nil},
		{"plain", "docker", nil, cty.NilVal, "", 0, nil},
		{"placed", "docker", nil, cty.NilVal, `agent.placed runs on runtime "default", whose docker driver has no per-agent settings`, 7, nil},
		{"placed", "other", hcldec.ObjectSpec{"zone": &hcldec.AttrSpec{Name: "zone", Type: cty.String}}, cty.NilVal, `"placement" is not expected here`, 8, nil},
		// With the drivers known, the error names the runtime the setting
		// needs, at the attribute.
		{"placed", "docker", nil, cty.NilVal, `Placement needs a swarm runtime; agent.placed runs on runtime "default", whose docker driver has no placement setting: it is a setting of the swarm driver. Run the agent on a runtime with driver = "swarm", or remove placement.`, 8, swarmPlaces},
		{"placed", "other", hcldec.ObjectSpec{"zone": &hcldec.AttrSpec{Name: "zone", Type: cty.String}}, cty.NilVal, `Placement needs a swarm runtime`, 8, swarmPlaces},
		{"placed", "swarm", placement, cty.ObjectVal(map[string]cty.Value{
			"placement": cty.ListVal([]cty.Value{cty.StringVal("node.labels.pool==agents")}),
		}), "", 0, swarmPlaces},
	} {
		t.Run(tc.agent+"/"+tc.driver, func(t *testing.T) {
			got, diags := scope.EvalAgentDriver(cfg.Agents[tc.agent], tc.driver, tc.spec, tc.offeredBy)
			if tc.wantErr != "" {
				if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.wantErr) {
					t.Fatalf("diags = %v, want an error with %q", diags, tc.wantErr)
				}
				if rng := diags[0].Subject; rng == nil || rng.Start.Line != tc.wantLine {
					t.Errorf("error at %v, want line %d", rng, tc.wantLine)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if got == cty.NilVal || tc.want == cty.NilVal {
				if got != tc.want {
					t.Fatalf("got %#v, want %#v", got, tc.want)
				}
				return
			}
			if !got.RawEquals(tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// swarmPlaces says that swarm, alone, has a placement setting.
func swarmPlaces(setting string) []string {
	if setting == "placement" {
		return []string{"swarm"}
	}
	return nil
}

func TestDuplicateDriverBlock(t *testing.T) {
	fsys := fstest.MapFS{"proj/Bottlefile": &fstest.MapFile{Data: []byte("agent \"a\" {\n  image = \"x\"\n  driver {}\n  driver {}\n}\n")}}
	_, diags := NewParserFS(fsys).LoadDir("proj")
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Duplicate driver block") || diags[0].Subject.Start.Line != 4 {
		t.Fatalf("diags = %v", diags)
	}
}
