package planner

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/lang"
	"github.com/bottlefile/bottlefile/state"
)

// TestConfigDrift: a gateway whose files in force (LiveObject.Config)
// differ from the digests recorded at apply is updated in place, with a
// reason naming the parts; one that matches, or that cannot tell, or a
// record from before the digests were recorded, is no change.
func TestConfigDrift(t *testing.T) {
	d := &desired{runtime: "default", driver: "docker", agent: &lang.Agent{Name: "coder"}, object: drivers.Object{
		Addr: "agent.coder.gateway", Kind: "gateway", Workload: true, InPlace: []string{"allow"},
		Attrs: map[string]cty.Value{"allow": cty.ListVal([]cty.Value{cty.StringVal("github.com:443")})},
	}}
	fp := fingerprint(d.object.Kind, d.object.Attrs, nil)
	applied := map[string]string{"config:rules": "r1", "config:credentials": "c1", "proxy": "http://gw:3128"}
	for _, tt := range []struct {
		name     string
		computed map[string]string
		live     string
		running  bool
		action   Action
		reason   string
	}{
		{"in sync", applied, "credentials=c1 forbid=f9 rules=r1", true, NoOp, ""},
		{"rules replaced by hand", applied, "credentials=c1 forbid=f9 rules=r2", true, Update, "its rules differ from what was applied (changed outside bottlefile); apply writes them again, in place"},
		{"both", applied, "credentials=missing rules=missing", true, Update, "its credentials and rules differ"},
		{"cannot tell", applied, "", true, NoOp, ""},
		{"recorded before digests", map[string]string{"proxy": "http://gw:3128"}, "credentials=c1 rules=r2", true, NoOp, ""},
		{"stopped: started first", applied, "credentials=c1 rules=r2", false, Start, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &state.Record{Addr: d.object.Addr, Kind: "gateway", Runtime: "default", ID: "g1", Hash: fp.Hash, AttrHashes: fp.Attrs, Computed: tt.computed, Workload: true}
			lo := &drivers.LiveObject{Addr: d.object.Addr, Kind: "gateway", ID: "g1", Hash: fp.Hash, Running: tt.running, Config: tt.live}
			c := diffObject(d, rec, lo)
			if c.Action != tt.action {
				t.Fatalf("action %v, want %v (reasons %q)", c.Action, tt.action, ReasonTexts(c.Reasons))
			}
			if got := strings.Join(ReasonTexts(c.Reasons), "; "); !strings.Contains(got, tt.reason) || (tt.reason == "" && tt.action == NoOp && got != "") {
				t.Errorf("reasons %q, want %q", got, tt.reason)
			}
		})
	}
}
