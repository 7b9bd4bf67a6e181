package state

import (
	"os"
	"testing"
)

// TestIntents: an intent is recorded before a create, survives the
// process (a reopen), is one per address, and goes when cleared; a state
// holding intents opens again for writing and reading (the bucket is not
// taken for a foreign one), and clearing what is not there writes nothing.
func TestIntents(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Init(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent(Intent{Addr: "agent.a", Kind: "container", Driver: "docker", Runtime: "default", Name: "bf-x-a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent(Intent{Addr: "agent.a.network", Kind: "network", Runtime: "default", PID: os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent(Intent{Addr: "agent.a", Kind: "container", Runtime: "other"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent(Intent{}); err == nil {
		t.Error("an intent without an address was recorded")
	}
	s.Close()

	for _, ro := range []bool{false, true} {
		s, err = Open(dir, Options{ReadOnly: ro})
		if err != nil {
			t.Fatalf("reopening a state with intents (read-only %v): %v", ro, err)
		}
		in, err := s.Intents()
		if err != nil {
			t.Fatal(err)
		}
		if len(in) != 2 || in[0].Addr != "agent.a" || in[0].Runtime != "other" || in[1].Addr != "agent.a.network" || in[1].PID != os.Getpid() || in[0].At.IsZero() {
			t.Fatalf("intents after reopening: %+v", in)
		}
		if recs, _ := s.Records(); len(recs) != 0 {
			t.Errorf("intents read as records: %+v", recs)
		}
		s.Close()
	}

	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	serial := s.Serial()
	if err := s.ClearIntent("agent.a"); err != nil {
		t.Fatal(err)
	}
	if s.Serial() != serial {
		t.Errorf("clearing an intent: serial %d, want %d (it dates records, which did not change)", s.Serial(), serial)
	}
	if err := s.ClearIntent("agent.none"); err != nil || s.WriteErr() != nil {
		t.Errorf("clearing a missing intent: err %v, write error %v", err, s.WriteErr())
	}
	in, _ := s.Intents()
	if len(in) != 1 || in[0].Addr != "agent.a.network" {
		t.Errorf("after clearing: %+v", in)
	}
}

// TestIntentClearedWithRecord: writing the record of an address, or
// deleting it, clears its intent in the same transaction.
func TestIntentClearedWithRecord(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Init(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"agent.a", "agent.b", "agent.c"} {
		if err := s.PutIntent(Intent{Addr: addr, Kind: "container"}); err != nil {
			t.Fatal(err)
		}
	}
	serial := s.Serial()
	if err := s.Put(Record{Addr: "agent.a", Kind: "container", ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("agent.b"); err != nil {
		t.Fatal(err)
	}
	in, _ := s.Intents()
	if len(in) != 1 || in[0].Addr != "agent.c" || s.Serial() != serial+2 {
		t.Errorf("intents %+v, serial %d (want %d): want only agent.c's left, one write each", in, s.Serial(), serial+2)
	}
}
