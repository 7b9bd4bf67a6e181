package planner

import (
	"encoding/json"
	"testing"
)

// FuzzDecodePlanFile: no input makes the plan-file reader panic, and what
// it accepts survives a round trip.
func FuzzDecodePlanFile(f *testing.F) {
	f.Add([]byte(`{"format_version":1,"config":{"Bottlefile":"ab"},"lineage":"l","serial":3,"options":{},"changes":[{"address":"agent.a","kind":"container","runtime":"default","action":"create","config_hash":"h"}]}`))
	f.Add([]byte(`{"format_version":1,"config":{}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"format_version":1,"config":{"x":"y"},"changes":[{"address":"a","action":"replace","live":{"Addr":"a","Running":true}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodePlanFile(data)
		if err != nil {
			return
		}
		p := s.Plan()
		_ = p.Summary().String()
		_ = p.Graph().String()
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("an accepted plan does not marshal: %v", err)
		}
		if _, err := DecodePlanFile(again); err != nil {
			t.Fatalf("an accepted plan does not read back: %v", err)
		}
	})
}
