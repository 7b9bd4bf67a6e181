package egress

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRulesFileRoundTrip(t *testing.T) {
	f := NewRulesFile("agent.coder", mustRules(t, "GitHub.com:443", "*.pythonhosted.org:443", "10.0.0.0/8"))
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "agent": "agent.coder",
  "allow": [
    "github.com:443",
    "*.pythonhosted.org:443",
    "10.0.0.0/8"
  ]
}
`
	if string(b) != want {
		t.Fatalf("Marshal =\n%s\nwant\n%s", b, want)
	}
	back, err := UnmarshalRulesFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Agent != "agent.coder" || strings.Join(back.Allow, " ") != "github.com:443 *.pythonhosted.org:443 10.0.0.0/8" {
		t.Fatalf("Unmarshal = %+v", back)
	}
	rules, err := back.Rules()
	if err != nil || len(rules) != 3 {
		t.Fatal(rules, err)
	}

	// No rules: "allow": [], never null.
	b, err = RulesFile{Agent: "agent.none"}.Marshal()
	if err != nil || !strings.Contains(string(b), `"allow": []`) {
		t.Fatalf("%s %v", b, err)
	}
	if f, err := UnmarshalRulesFile(b); err != nil || len(f.Allow) != 0 {
		t.Fatal(f, err)
	}
	if _, err := (RulesFile{Allow: []string{"*"}}).Marshal(); err == nil {
		t.Fatal("Marshal accepted an invalid rule")
	}
}

func TestUnmarshalRulesFileErrors(t *testing.T) {
	for in, want := range map[string]string{
		``:                                   "rules file: EOF",
		`{"agent":"a"}`:                      `missing "allow"`,
		`{"agent":"a","allow":null}`:         `missing "allow"`,
		`{"agent":"a","allow":["*"]}`:        `"*" alone would allow every host`,
		`{"agent":"a","allow":["x"],"d":1}`:  `unknown field "d"`,
		`{"agent":"a","allow":["x"]} {}`:     "unexpected data after the JSON object",
		`{"agent":"a","allow":"github.com"}`: "cannot unmarshal string",
		`["github.com"]`:                     "cannot unmarshal array",
		`{"agent":"a","allow":["x"]`:         "unexpected EOF",
	} {
		_, err := UnmarshalRulesFile([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("UnmarshalRulesFile(%q) = %v, want %q", in, err, want)
		}
	}
}

func writeRules(t *testing.T, path, agent string, allow ...string) {
	t.Helper()
	b, err := RulesFile{Agent: agent, Allow: allow}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, path, b)
}

// replaceFile replaces path by a complete new file, so that a watcher polling
// in a loop never sees it half-written (see TestRulesWatcherHalfWritten).
func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func readEvent(t *testing.T, l *lineLog) RulesEvent {
	t.Helper()
	var e RulesEvent
	line := l.next(t)
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return e
}

func TestWatchRulesFileReloads(t *testing.T) {
	_, port := echoServer(t)
	p := strconv.Itoa(port)
	res := newResolver("a.test", "127.0.0.1", "b.test", "127.0.0.1")
	tg := startGateway(t, nil, res)
	path := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, path, "agent.first", "a.test:"+p, "127.0.0.1:"+p)

	events := newLineLog()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchRulesFile(ctx, path, tg.Gateway, time.Millisecond, events) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	e := readEvent(t, events)
	if e.Event != "rules-loaded" || e.Agent != "agent.first" || strings.Join(e.Allow, " ") != "a.test:"+p+" 127.0.0.1:"+p || e.File != path {
		t.Fatalf("event %+v", e)
	}

	status := func(target string) (int, string) {
		_, _, resp, body := tg.connect(t, target)
		tg.log.decision(t)
		return resp.StatusCode, body
	}
	if s, _ := status("a.test:" + p); s != 200 {
		t.Fatalf("a.test: %d", s)
	}
	if s, body := status("b.test:" + p); s != 403 || !strings.Contains(body, "of agent.first") {
		t.Fatalf("b.test: %d %q", s, body)
	}

	// The new file takes effect without a restart.
	writeRules(t, path, "agent.second", "b.test:"+p, "127.0.0.1:"+p)
	if e := readEvent(t, events); e.Event != "rules-loaded" || e.Agent != "agent.second" {
		t.Fatalf("event %+v", e)
	}
	if s, _ := status("b.test:" + p); s != 200 {
		t.Fatalf("b.test after reload: %d", s)
	}
	if s, body := status("a.test:" + p); s != 403 || !strings.Contains(body, "of agent.second") {
		t.Fatalf("a.test after reload: %d %q", s, body)
	}

	// An invalid file is reported once, and the rules in force stay.
	replaceFile(t, path, []byte(`{"agent":"agent.third","allow":["https://a.test"]}`))
	e = readEvent(t, events)
	if e.Event != "rules-invalid" || !strings.Contains(e.Error, "has a URL scheme") || e.Agent != "agent.second" ||
		strings.Join(e.Allow, " ") != "b.test:"+p+" 127.0.0.1:"+p {
		t.Fatalf("event %+v", e)
	}
	if s, _ := status("b.test:" + p); s != 200 {
		t.Fatalf("b.test after an invalid reload: %d", s)
	}

	// A missing file too.
	os.Remove(path)
	if e := readEvent(t, events); e.Event != "rules-unreadable" || !strings.Contains(e.Error, "no such file") {
		t.Fatalf("event %+v", e)
	}
	if s, _ := status("b.test:" + p); s != 200 {
		t.Fatalf("b.test with no file: %d", s)
	}
	writeRules(t, path, "agent.fourth")
	if e := readEvent(t, events); e.Event != "rules-loaded" || len(e.Allow) != 0 {
		t.Fatalf("event %+v", e)
	}
	if s, _ := status("b.test:" + p); s != 403 {
		t.Fatalf("b.test with an empty allowlist: %d", s)
	}
	events.noMore(t)
}

func TestRulesWatcherSeesSameSizeSameMtime(t *testing.T) {
	// docker cp keeps the source's mtime, and an edit may keep the size: the
	// watcher compares content.
	g := &Gateway{}
	path := filepath.Join(t.TempDir(), "rules.json")
	events := newLineLog()
	w := newRulesWatcher(path, "", g, events)
	mtime := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(allow string) {
		if err := os.WriteFile(path, []byte(`{"agent":"a","allow":["`+allow+`"]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write("github.com:443")
	w.check()
	if e := readEvent(t, events); e.Event != "rules-loaded" {
		t.Fatalf("%+v", e)
	}
	w.check() // unchanged: nothing
	events.noMore(t)
	write("gitlab.com:443")
	w.check()
	if e := readEvent(t, events); e.Event != "rules-loaded" || e.Allow[0] != "gitlab.com:443" {
		t.Fatalf("%+v", e)
	}
	if r := g.Rules(); len(r) != 1 || r[0].String() != "gitlab.com:443" {
		t.Fatalf("rules %v", r)
	}
	// The same invalid content is reported once.
	write("*")
	w.check()
	w.check()
	if e := readEvent(t, events); e.Event != "rules-invalid" {
		t.Fatalf("%+v", e)
	}
	events.noMore(t)
	// A file over the size bound is refused.
	if err := os.WriteFile(path, make([]byte, maxRulesFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	w.check()
	w.check()
	if e := readEvent(t, events); e.Event != "rules-unreadable" || !strings.Contains(e.Error, "larger than") {
		t.Fatalf("%+v", e)
	}
	if r := g.Rules(); len(r) != 1 || r[0].String() != "gitlab.com:443" {
		t.Fatalf("rules %v", r)
	}
}

func TestRulesWatcherHalfWritten(t *testing.T) {
	// docker cp removes the file, then writes it: a check may see no file, or
	// a part of it. Neither is applied, nor reported unless it lasts.
	g := &Gateway{}
	path := filepath.Join(t.TempDir(), "rules.json")
	events := newLineLog()
	w := newRulesWatcher(path, "", g, events)
	full := []byte(`{"agent":"a","allow":["github.com:443"]}` + "\n")
	if err := os.WriteFile(path, full, 0o644); err != nil {
		t.Fatal(err)
	}
	w.check()
	readEvent(t, events)

	next := []byte(`{"agent":"a","allow":["gitlab.com:443"]}` + "\n")
	os.Remove(path)
	w.check() // no file
	for i := range len(next) - 1 {
		if err := os.WriteFile(path, next[:i], 0o644); err != nil {
			t.Fatal(err)
		}
		w.check() // a part
		if r := g.Rules(); r[0].String() != "github.com:443" {
			t.Fatalf("applied a partial file %q: %v", next[:i], r)
		}
	}
	events.noMore(t)
	if err := os.WriteFile(path, next, 0o644); err != nil {
		t.Fatal(err)
	}
	w.check()
	if e := readEvent(t, events); e.Event != "rules-loaded" || e.Allow[0] != "gitlab.com:443" {
		t.Fatalf("%+v", e)
	}
	// The problem that lasts is reported.
	os.Remove(path)
	w.check()
	events.noMore(t)
	w.check()
	if e := readEvent(t, events); e.Event != "rules-unreadable" || e.Allow[0] != "gitlab.com:443" {
		t.Fatalf("%+v", e)
	}
	w.check()
	events.noMore(t)
}

func TestWatchRulesFileArguments(t *testing.T) {
	ctx := context.Background()
	if err := WatchRulesFile(ctx, "x", nil, time.Second, nil); err == nil {
		t.Error("nil Gateway accepted")
	}
	if err := WatchRulesFile(ctx, "x", &Gateway{}, 0, nil); err == nil {
		t.Error("zero poll accepted")
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := WatchRulesFile(ctx, filepath.Join(t.TempDir(), "none"), &Gateway{}, time.Second, nil); err != nil {
		t.Errorf("cancelled watch: %v", err)
	}
}

func TestWatchTrigger(t *testing.T) {
	// Main's SIGHUP path: a trigger checks at once, whatever the poll interval.
	g := &Gateway{}
	path := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, path, "a", "a.test:443")
	events := newLineLog()
	now := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchRulesFile(ctx, path, g, time.Hour, events, now)
	}()
	defer func() { cancel(); <-done }()
	readEvent(t, events)
	writeRules(t, path, "a", "b.test:443")
	now <- struct{}{}
	if e := readEvent(t, events); e.Event != "rules-loaded" || e.Allow[0] != "b.test:443" {
		t.Fatalf("%+v", e)
	}
}

func TestCompactPrefixes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"10.1.2.3/32 10.0.0.0/8 172.17.0.1/32", "10.0.0.0/8 172.17.0.1/32"},
		{"192.168.1.0/24 192.168.0.0/16 192.168.1.7/32 192.169.0.1/32", "192.168.0.0/16 192.169.0.1/32"},
		{"fd00::1/128 10.0.0.1/32 fd00::/64", "10.0.0.1/32 fd00::/64"},
	} {
		var in []netip.Prefix
		for _, s := range strings.Fields(tc.in) {
			in = append(in, netip.MustParsePrefix(s))
		}
		var got []string
		for _, p := range CompactPrefixes(in) {
			got = append(got, p.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("CompactPrefixes(%s) = %v, want %s", tc.in, got, tc.want)
		}
	}
}
