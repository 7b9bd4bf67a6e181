package planner

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodePlanFile: no input makes the plan-file reader panic, and what
// it accepts survives a round trip.
func FuzzDecodePlanFile(f *testing.F) {
	f.Add([]byte(`{"format_version":1,"config":{"Bottlefile":"ab"},"lineage":"l","serial":3,"options":{},"changes":[{"address":"agent.a","kind":"container","runtime":"default","action":"create","config_hash":"h"}]}`))
	f.Add([]byte(`{"format_version":1,"config":{}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"format_version":2,"config":{"x":"y"},"changes":[{"address":"a","action":"delete","reasons":[{"code":"discards","params":{"covered":"destroy"},"cause":{"code":"removed-no-destroy"}},"a sentence",{"code":"from-a-newer-bottlefile"}]}]}`))
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

// TestPlanFileVersions: a plan file of version 1, whose reasons are
// sentences, is still read, its reasons as written; one of this version
// holds codes and parameters and reads back the same; a newer version is
// refused, saying which versions this bottlefile reads.
func TestPlanFileVersions(t *testing.T) {
	s, err := ReadPlanFile("testdata/planfile/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Plan()
	var got []string
	for _, c := range p.Changes {
		got = append(got, ReasonTexts(c.Reasons)...)
		for _, r := range c.Reasons {
			if r.Code != ReasonText {
				t.Errorf("a version 1 reason has code %q, want %q", r.Code, ReasonText)
			}
		}
	}
	want := []string{
		"it was stopped outside bottlefile; it will be started, not replaced",
		"snapshot_policy.keep_last = 1, and 1 newer snapshots are kept",
	}
	if !slices.Equal(got, want) {
		t.Errorf("version 1 reasons = %q, want %q", got, want)
	}

	// Written now: codes and parameters, the same sentences.
	p.Changes[0].Reasons = []Reason{because(ReasonStopped)}
	p.Changes[1].Reasons = []Reason{because(ReasonKeepLast, "keep_last", "1")}
	data, err := json.Marshal(Save(p, s.Config, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"reasons":[{"code":"keep-last","params":{"keep_last":"1"}}]`) || !strings.Contains(string(data), `"format_version":2`) {
		t.Errorf("a saved plan holds no reason codes:\n%s", data)
	}
	back, err := DecodePlanFile(data)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, c := range back.Plan().Changes {
		got = append(got, ReasonTexts(c.Reasons)...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("version 2 reasons = %q, want %q", got, want)
	}

	_, err = DecodePlanFile([]byte(`{"format_version":3,"config":{"Bottlefile":"x"}}`))
	if err == nil || !strings.Contains(err.Error(), "format version 3; this bottlefile reads versions 1 to 2") {
		t.Errorf("a version 3 plan file: %v", err)
	}
}
