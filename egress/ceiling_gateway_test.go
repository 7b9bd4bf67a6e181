package egress

import (
	"bytes"
	"context"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGatewayCeiling: a gateway given a ceiling refuses what lies outside
// it even when its rules allow it (set directly, as by a rules file
// changed by hand), and a rules file with a rule outside the ceiling is
// not loaded: the rules in force stay.
func TestGatewayCeiling(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	res := newResolver("in.test", "127.0.0.1", "out.test", "127.0.0.1")
	g := &Gateway{Agent: "agent.coder", loopbackByRule: true, Ceiling: mustRules(t, "in.test:"+p, "127.0.0.1:"+p)}
	tg := startGateway(t, g, res, "in.test:"+p, "out.test:"+p, "127.0.0.1:"+p)

	status := func(target string) (int, string) {
		t.Helper()
		_, _, resp, body := tg.connect(t, target)
		tg.log.decision(t)
		return resp.StatusCode, body
	}
	if s, body := status("in.test:" + p); s != 200 {
		t.Fatalf("in.test inside the ceiling: %d %q", s, body)
	}
	if s, body := status("out.test:" + p); s != 403 || !strings.Contains(body, "outside the egress ceiling") {
		t.Fatalf("out.test outside the ceiling, allowed by a rule: %d %q", s, body)
	}
	if got := res.Lookups(); strings.Contains(strings.Join(got, " "), "out.test") {
		t.Errorf("the gateway resolved a name outside its ceiling: %q", got)
	}

	// A rules file that widens beyond the ceiling is refused whole.
	path := t.TempDir() + "/rules.json"
	writeRules(t, path, "agent.coder", "in.test:"+p, "127.0.0.1:"+p)
	events := newLineLog()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchRulesFile(ctx, path, g, time.Millisecond, events) }()
	defer func() { cancel(); <-done }()
	if e := readEvent(t, events); e.Event != "rules-loaded" {
		t.Fatalf("event %+v", e)
	}
	writeRules(t, path, "agent.coder", "in.test:"+p, "out.test:"+p, "0.0.0.0/0:"+p)
	e := readEvent(t, events)
	if e.Event != "rules-invalid" || !strings.Contains(e.Error, `rules "out.test:`+p+`", "0.0.0.0/0:`+p+`" lie outside the gateway's egress ceiling`) ||
		strings.Join(e.Allow, " ") != "in.test:"+p+" 127.0.0.1:"+p {
		t.Fatalf("event %+v", e)
	}
	if s, _ := status("out.test:" + p); s != 403 {
		t.Fatalf("out.test after a widening rules file: %d", s)
	}
	// The file taken before, written back (as apply restores it): logged
	// as in force again, for whoever waits for it.
	writeRules(t, path, "agent.coder", "in.test:"+p, "127.0.0.1:"+p)
	if e := readEvent(t, events); e.Event != "rules-loaded" || strings.Join(e.Allow, " ") != "in.test:"+p+" 127.0.0.1:"+p {
		t.Fatalf("event after writing back the file in force: %+v", e)
	}
}

// TestGatewayEmptyCeiling: an empty ceiling allows nothing; a nil one
// bounds nothing.
func TestGatewayEmptyCeiling(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	res := newResolver("in.test", "127.0.0.1")
	for _, tt := range []struct {
		ceiling []Rule
		want    int
	}{{[]Rule{}, 403}, {nil, 200}, {mustRules(t, "127.0.0.1:"+p), 403}} {
		g := &Gateway{Agent: "agent.coder", loopbackByRule: true, Ceiling: tt.ceiling}
		tg := startGateway(t, g, res, "in.test:"+p, "127.0.0.1:"+p)
		_, _, resp, body := tg.connect(t, "in.test:"+p)
		tg.log.decision(t)
		if resp.StatusCode != tt.want {
			t.Errorf("ceiling %v: %d %q, want %d", tt.ceiling, resp.StatusCode, body, tt.want)
		}
	}
}

func TestParseCeiling(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "",
		"github.com:443":                   "github.com:443",
		"*.github.com:443,10.0.0.0/8:5432": "*.github.com:443 10.0.0.0/8:5432",
	} {
		rules, err := ParseCeiling(in)
		if err != nil || rules == nil {
			t.Fatalf("ParseCeiling(%q) = %v, %v", in, rules, err)
		}
		if got := strings.Join(NewRulesFile("", rules).Allow, " "); got != want {
			t.Errorf("ParseCeiling(%q) = %q, want %q", in, got, want)
		}
		if back := CeilingFlag(NewRulesFile("", rules).Allow); back != in {
			t.Errorf("CeilingFlag round trip of %q = %q", in, back)
		}
	}
	if _, err := ParseCeiling("github.com:443,*"); err == nil {
		t.Error("ParseCeiling accepted an invalid rule")
	}
}

// TestWatcherReportsLoaded: with a state file, the watcher reports the
// digest of each file as it last read it, rewritten when a file changes
// (replaced by hand included), whether taken or refused; and logs each
// change as a files-in-force line, once, before the check's other events.
func TestWatcherReportsLoaded(t *testing.T) {
	dir := t.TempDir()
	rules, forbid, state := dir+"/rules.json", dir+"/forbid.json", dir+"/loaded.json"
	writeRules(t, rules, "agent.coder", "github.com:443")
	if err := os.WriteFile(forbid, []byte(`{"forbid":["10.9.0.0/16"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Agent: "agent.coder", Ceiling: mustRules(t, "*.github.com:443", "github.com:443")}
	var log bytes.Buffer
	w := newWatcher(rules, forbid, "", g, &log)
	w.statePath = state
	logged := 0 // files-in-force lines so far
	loaded := func() map[string]string {
		t.Helper()
		data, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseLoaded(data)
		if err != nil {
			t.Fatal(err)
		}
		// The log's last files-in-force line says the same, once per change.
		var last map[string]string
		n := 0
		for _, line := range strings.Split(log.String(), "\n") {
			if l, ok := ParseLoadedEvent([]byte(line)); ok {
				last, n = l, n+1
			}
		}
		if !maps.Equal(last, m) {
			t.Fatalf("last files-in-force line %v, state file %v; log:\n%s", last, m, log.String())
		}
		if n != logged+1 {
			t.Fatalf("%d files-in-force lines after %d, want one more; log:\n%s", n, logged, log.String())
		}
		logged = n
		return m
	}
	digest := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return FileDigest(data)
	}
	w.check()
	first := digest(rules)
	if m := loaded(); m["rules"] != first || m["forbid"] != digest(forbid) || len(m) != 2 {
		t.Fatalf("loaded = %v", m)
	}
	// Nothing changed: nothing logged.
	before := log.Len()
	w.check()
	if log.Len() != before {
		t.Fatalf("a check with nothing changed logged %q", log.String()[before:])
	}
	// Replaced by hand, within the ceiling: loaded, and the report says so,
	// in a line before the rules event (whoever waits for that event may
	// read the report next).
	writeRules(t, rules, "agent.coder", "github.com:443", "api.github.com:443")
	w.check()
	if m := loaded(); m["rules"] != digest(rules) || m["rules"] == first {
		t.Fatalf("after a hand edit, loaded = %v", m)
	}
	if lines := strings.Split(strings.TrimSpace(log.String()[before:]), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `"event":"files-in-force"`) || !strings.Contains(lines[1], `"event":"rules-loaded"`) {
		t.Fatalf("the check's lines, want files-in-force then rules-loaded:\n%s", log.String()[before:])
	}
	second := digest(rules)
	// Beyond the ceiling: refused, the rules in force stay, and the report
	// says the file is not the one taken.
	writeRules(t, rules, "agent.coder", "evil.test:443")
	w.check()
	if m := loaded(); m["rules"] != digest(rules) || m["rules"] == second {
		t.Fatalf("after a refused file, loaded = %v, want the refused file's digest", m)
	}
	if got := NewRulesFile("", g.Rules()).Allow; strings.Join(got, " ") != "github.com:443 api.github.com:443" {
		t.Fatalf("rules in force after a refused file: %q", got)
	}
	// Gone: unreadable.
	os.Remove(rules)
	w.check()
	if m := loaded(); m["rules"] != "unreadable" {
		t.Fatalf("after removing the file, loaded = %v", m)
	}
	if _, err := os.Stat(state + ".new"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}

// TestParseLoadedEvent: only a whole files-in-force line is a report; a
// decision whose fields hold the words (a host an agent chose), another
// event, a line cut short or one without the digests are not.
func TestParseLoadedEvent(t *testing.T) {
	for _, tc := range []struct {
		line string
		want map[string]string
	}{
		{`{"time":"2026-11-27T09:00:00Z","event":"files-in-force","loaded":{"rules":"r1","credentials":"c1"}}`, map[string]string{"rules": "r1", "credentials": "c1"}},
		{`{"event":"files-in-force","loaded":{}}`, map[string]string{}},
		{`{"event":"files-in-force"}`, nil},
		{`{"event":"rules-loaded","loaded":{"rules":"r1"}}`, nil},
		{`{"decision":"deny","host":"{\"event\":\"files-in-force\",\"loaded\":{\"rules\":\"x\"}}"}`, nil},
		{`{"event":"files-in-force","loaded":{"rules":"r1"`, nil},
		{`files-in-force`, nil},
		{``, nil},
	} {
		got, ok := ParseLoadedEvent([]byte(tc.line))
		if ok != (tc.want != nil) || !maps.Equal(got, tc.want) {
			t.Errorf("ParseLoadedEvent(%s) = %v, %v; want %v", tc.line, got, ok, tc.want)
		}
	}
}
