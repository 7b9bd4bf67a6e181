package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// RulesFile is the allowlist file the gateway watches, written by the docker
// driver into the gateway container:
//
//	{"agent": "agent.coder", "allow": ["github.com:443"]}
//
// "allow" must be present; [] allows nothing.
type RulesFile struct {
	Agent string   `json:"agent"`
	Allow []string `json:"allow"`
	// Sidecars names the bottle's sidecars: a request for one is refused
	// with advice to connect to it directly (the client ignored NO_PROXY).
	Sidecars []string `json:"sidecars,omitempty"`
}

// maxRulesFileSize bounds what the watcher reads.
const maxRulesFileSize = 1 << 20

// NewRulesFile makes the file for agent's rules, in canonical form.
func NewRulesFile(agent string, rules []Rule) RulesFile {
	f := RulesFile{Agent: agent, Allow: make([]string, 0, len(rules))}
	for _, r := range rules {
		f.Allow = append(f.Allow, r.String())
	}
	return f
}

// Rules parses the allowlist.
func (f RulesFile) Rules() ([]Rule, error) {
	return ParseRules(f.Allow)
}

// Marshal returns the file's JSON, indented and ending in a newline. It fails
// on an invalid rule, so that the gateway never gets a file it would reject.
func (f RulesFile) Marshal() ([]byte, error) {
	if _, err := f.Rules(); err != nil {
		return nil, err
	}
	if f.Allow == nil {
		f.Allow = []string{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// UnmarshalRulesFile parses and checks a rules file: unknown fields, a missing
// "allow", trailing data and invalid rules are errors.
func UnmarshalRulesFile(data []byte) (RulesFile, error) {
	var raw struct {
		Agent    string    `json:"agent"`
		Allow    *[]string `json:"allow"`
		Sidecars []string  `json:"sidecars"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return RulesFile{}, fmt.Errorf("rules file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return RulesFile{}, errors.New("rules file: unexpected data after the JSON object")
	}
	if raw.Allow == nil {
		return RulesFile{}, errors.New(`rules file: missing "allow" (use [] to allow nothing)`)
	}
	f := RulesFile{Agent: raw.Agent, Allow: *raw.Allow, Sidecars: raw.Sidecars}
	if _, err := f.Rules(); err != nil {
		return RulesFile{}, fmt.Errorf("rules file: %w", err)
	}
	return f, nil
}

// ForbidFile lists prefixes the gateway never connects to, beside its
// -forbid flags: the docker driver writes it into the gateway container
// and rewrites it as networks come and go.
//
//	{"forbid": ["10.213.0.0/16", "172.17.0.1/32"]}
type ForbidFile struct {
	Forbid []string `json:"forbid"`
}

// NewForbidFile makes the file for prefixes.
func NewForbidFile(prefixes []netip.Prefix) ForbidFile {
	f := ForbidFile{Forbid: make([]string, len(prefixes))}
	for i, p := range prefixes {
		f.Forbid[i] = p.String()
	}
	return f
}

// CompactPrefixes sorts a forbid list and drops the prefixes another one
// contains.
func CompactPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if a.Bits() != b.Bits() {
			return a.Bits() - b.Bits()
		}
		return a.Addr().Compare(b.Addr())
	})
	var out []netip.Prefix
next:
	for _, p := range ps {
		for _, q := range out {
			if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
				continue next
			}
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}

// Prefixes parses the list.
func (f ForbidFile) Prefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(f.Forbid))
	for _, s := range f.Forbid {
		p, err := ParsePrefixOrAddr(s)
		if err != nil {
			return nil, fmt.Errorf("forbid file: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Marshal returns the file's JSON, ending in a newline.
func (f ForbidFile) Marshal() ([]byte, error) {
	if _, err := f.Prefixes(); err != nil {
		return nil, err
	}
	if f.Forbid == nil {
		f.Forbid = []string{}
	}
	b, err := json.Marshal(f)
	return append(b, '\n'), err
}

// UnmarshalForbidFile parses and checks a forbid file, as strictly as a
// rules file.
func UnmarshalForbidFile(data []byte) (ForbidFile, error) {
	var raw struct {
		Forbid *[]string `json:"forbid"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return ForbidFile{}, fmt.Errorf("forbid file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return ForbidFile{}, errors.New("forbid file: unexpected data after the JSON object")
	}
	if raw.Forbid == nil {
		return ForbidFile{}, errors.New(`forbid file: missing "forbid"`)
	}
	f := ForbidFile{Forbid: *raw.Forbid}
	if _, err := f.Prefixes(); err != nil {
		return ForbidFile{}, err
	}
	return f, nil
}

// RulesEvent is a line the rules watcher logs.
type RulesEvent struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"` // "rules-loaded", "rules-invalid", "rules-unreadable", and "forbid-..." for the forbid file
	File   string    `json:"file"`
	Agent  string    `json:"agent,omitempty"`
	Allow  []string  `json:"allow"`            // the rules in force after the event
	Serial uint64    `json:"serial,omitempty"` // their serial, as decisions carry it
	Forbid []string  `json:"forbid,omitempty"` // forbid-loaded: the prefixes loaded
	// TunnelsClosed counts the open tunnels the new rules or prefixes no
	// longer allow, which the gateway closed.
	TunnelsClosed int    `json:"tunnels_closed,omitempty"`
	Error         string `json:"error,omitempty"` // why the file was not applied
	// Version and Credentials (their names, never their values) are those
	// of the credentials file in force, in credentials events.
	Version     string   `json:"version,omitempty"`
	Credentials []string `json:"credentials,omitempty"`
}

// WatchRulesFile applies the rules file at path to g now, then whenever its
// content changes, checking every poll, until ctx is done (then it returns nil).
// It compares content hashes rather than modification times and sizes, which
// a copy (docker cp keeps the source's mtime) or an edit of the same length
// leave unchanged; the file is small, and reading it is cheap. When the file is
// missing, unreadable or invalid, g keeps its rules and one line says so, once
// the problem has lasted two checks (docker cp removes the file and writes it
// anew, and a check may fall in between). Each event is one JSON line
// ([RulesEvent]) on log (nil discards them). It returns an error only for
// invalid arguments.
func WatchRulesFile(ctx context.Context, path string, g *Gateway, poll time.Duration, log io.Writer) error {
	return watchRulesFile(ctx, path, g, poll, log, nil)
}

// watchRulesFile is WatchRulesFile with an extra trigger: a receive on now
// checks the file at once (Main sends one on SIGHUP).
func watchRulesFile(ctx context.Context, path string, g *Gateway, poll time.Duration, log io.Writer, now <-chan struct{}) error {
	if g == nil {
		return errors.New("egress: WatchRulesFile needs a Gateway")
	}
	if poll <= 0 {
		return fmt.Errorf("egress: WatchRulesFile: poll interval %v is not positive", poll)
	}
	w := newRulesWatcher(path, "", g, log)
	w.check()
	w.run(ctx, poll, now)
	return nil
}

// run checks the file every poll, and at once on a receive on now, until ctx
// is done.
func (w *rulesWatcher) run(ctx context.Context, poll time.Duration, now <-chan struct{}) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-now:
		}
		w.check()
	}
}

// rulesWatcher watches the rules file and, when set, the forbid file.
type rulesWatcher struct {
	g     *Gateway
	log   io.Writer
	files []*watchedFile // the forbid file first: a reload takes both in that order
	// statePath is where report writes what is in force ("" for nowhere);
	// reported is what it wrote last, logged what it logged last.
	statePath string
	reported  []byte
	logged    []byte
}

type watchedFile struct {
	path     string
	kind     string                                // "rules" or "forbid", for events
	apply    func(data []byte) (RulesEvent, error) // parses and applies the file
	applied  [32]byte                              // hash of the content in force
	have     bool                                  // applied is set
	pending  string                                // the problem seen at the last check, not yet reported
	reported string                                // the problem reported last
	seen     string                                // digest of the content last read, "unreadable", "" before any
	loaded   RulesEvent                            // the event of the content in force
}

func newRulesWatcher(rulesPath, forbidPath string, g *Gateway, log io.Writer) *rulesWatcher {
	return newWatcher(rulesPath, forbidPath, "", g, log)
}

// newWatcher watches the rules, forbid and credentials files (each when
// its path is not ""), taking the forbid file, then the credentials, then
// the rules at each check.
func newWatcher(rulesPath, forbidPath, credsPath string, g *Gateway, log io.Writer) *rulesWatcher {
	w := &rulesWatcher{g: g, log: log}
	if forbidPath != "" {
		w.files = append(w.files, &watchedFile{path: forbidPath, kind: "forbid", apply: func(data []byte) (RulesEvent, error) {
			f, err := UnmarshalForbidFile(data)
			if err != nil {
				return RulesEvent{}, err
			}
			ps, _ := f.Prefixes() // checked by UnmarshalForbidFile
			return RulesEvent{Forbid: f.Forbid, TunnelsClosed: g.SetForbidden(ps)}, nil
		}})
	}
	if credsPath != "" {
		w.files = append(w.files, &watchedFile{path: credsPath, kind: "credentials", apply: func(data []byte) (RulesEvent, error) {
			f, err := UnmarshalCredentialsFile(data)
			if err != nil {
				return RulesEvent{}, err
			}
			if err := g.SetCredentials(f); err != nil {
				return RulesEvent{}, err
			}
			ev := RulesEvent{Version: f.Version}
			for _, c := range f.Credentials {
				ev.Credentials = append(ev.Credentials, c.Name)
			}
			return ev, nil
		}})
	}
	if rulesPath != "" {
		w.files = append(w.files, &watchedFile{path: rulesPath, kind: "rules", apply: func(data []byte) (RulesEvent, error) {
			f, err := UnmarshalRulesFile(data)
			if err != nil {
				return RulesEvent{}, err
			}
			rules, _ := f.Rules() // checked by UnmarshalRulesFile
			if out := g.outsideCeiling(rules); len(out) > 0 {
				// Never written by bottlefile, which checks every rule
				// against the ceiling: the file was changed by hand.
				return RulesEvent{}, fmt.Errorf("rules file: %s outside the gateway's egress ceiling %q; the rules in force are kept", ruleWords(out), NewRulesFile("", g.Ceiling).Allow)
			}
			return RulesEvent{Agent: f.Agent, TunnelsClosed: g.setRuleset(f.Agent, rules, f.Sidecars)}, nil
		}})
	}
	return w
}

// check reads each file once and applies it if its content changed. A
// problem (missing, unreadable, invalid) is reported once it was seen at two
// checks in a row: docker cp removes the file and writes it anew, and a
// check may fall in between. A truncated file is never valid JSON, so a
// half-written file is never applied.
func (w *rulesWatcher) check() {
	var events []func()
	for _, f := range w.files {
		if emit := w.checkFile(f); emit != nil {
			events = append(events, emit)
		}
	}
	// The report first: whoever waits for an event may read it next.
	w.report()
	for _, emit := range events {
		emit()
	}
}

// report writes to the state file (-state), when it changed, the digest
// of each file as the watcher last read it, by kind ("unreadable" when it
// could not), whether it took it or refused it: so that the driver can
// tell, with one read, a gateway whose files were changed by hand from
// one holding what bottlefile wrote. A file taken is in force; one
// refused (outside the ceiling) is not, but is not what was applied
// either. Written to a new file renamed over the old, so a reader never
// sees half of it. Each change is also logged, before the events of the
// check that made it, as a [LoadedEvent] line: a driver reads the last one
// from the end of the log, which costs the engine far less than a copy out
// of the container (that mounts it), and reads the file only when the line
// has scrolled out of what it reads.
func (w *rulesWatcher) report() {
	if w.statePath == "" {
		return
	}
	loaded := map[string]string{}
	for _, f := range w.files {
		if f.seen != "" {
			loaded[f.kind] = f.seen
		}
	}
	data, err := json.Marshal(loaded)
	if err != nil {
		return
	}
	if !bytes.Equal(data, w.logged) && w.log != nil {
		line, err := json.Marshal(LoadedEvent{Time: w.g.now().UTC(), Event: FilesInForceEvent, Loaded: loaded})
		if err == nil {
			w.log.Write(append(line, '\n'))
			w.logged = data
		}
	}
	if bytes.Equal(data, w.reported) {
		return
	}
	if atomicfile.Write(w.statePath, append(data, '\n'), 0o644) == nil {
		w.reported = data
	}
}

// FilesInForceEvent is the event of a [LoadedEvent] line.
const FilesInForceEvent = "files-in-force"

// LoadedEvent is the line a gateway with a state file (-state) logs on
// stderr whenever what it reports there changes, at its start included:
// the digest of each file as it last read it, by kind.
type LoadedEvent struct {
	Time   time.Time         `json:"time"`
	Event  string            `json:"event"` // FilesInForceEvent
	Loaded map[string]string `json:"loaded"`
}

// ParseLoadedEvent reads one line of a gateway's stderr: the report of a
// [LoadedEvent], and whether the line is one. Every other line (a rules
// event, a decision, a line cut short) is not.
func ParseLoadedEvent(line []byte) (map[string]string, bool) {
	var ev LoadedEvent
	if json.Unmarshal(line, &ev) != nil || ev.Event != FilesInForceEvent || ev.Loaded == nil {
		return nil, false
	}
	return ev.Loaded, true
}

// FileDigest is how a gateway reports a file it applied (its -state
// file): the SHA-256 of its content, in hex.
func FileDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ParseLoaded reads a gateway's -state file: the digest of each file as
// the gateway last read it, by kind ("rules", "credentials", "forbid").
func ParseLoaded(data []byte) (map[string]string, error) {
	var loaded map[string]string
	if err := json.Unmarshal(data, &loaded); err != nil {
		return nil, fmt.Errorf("gateway state file: %w", err)
	}
	return loaded, nil
}

// checkFile reads f and applies it if its content changed; it returns the
// event to log, if any.
func (w *rulesWatcher) checkFile(f *watchedFile) (emit func()) {
	event, msg, key := "", "", ""
	data, err := readSmallFile(f.path)
	if err != nil {
		event, msg = f.kind+"-unreadable", err.Error()
		key = event + ":" + msg
		f.seen = "unreadable"
	} else {
		sum := sha256.Sum256(data)
		f.seen = hex.EncodeToString(sum[:])
		if f.have && sum == f.applied {
			recovered := f.reported != ""
			f.pending, f.reported = "", ""
			if recovered {
				// The file in force is back after a problem was logged (a
				// refused file replaced by the one taken before): say it
				// is in force again, as a driver waiting for it reads the
				// last event.
				ev := f.loaded
				ev.TunnelsClosed = 0
				return w.emitter(f, ev)
			}
			return nil
		}
		ev, err := f.apply(data)
		if err == nil {
			f.have, f.applied = true, sum
			f.pending, f.reported = "", ""
			ev.Event = f.kind + "-loaded"
			f.loaded = ev
			return w.emitter(f, ev)
		}
		event, msg = f.kind+"-invalid", err.Error()
		key = event + ":" + hex.EncodeToString(sum[:])
	}
	switch key {
	case f.reported:
	case f.pending:
		f.reported = key
		return w.emitter(f, RulesEvent{Event: event, Error: msg})
	default:
		f.pending = key
	}
	return nil
}

// emitter is emit of the event as it stands now: the rules in force are
// read when it is made, not when it runs.
func (w *rulesWatcher) emitter(f *watchedFile, ev RulesEvent) func() {
	ev = w.complete(f, ev)
	return func() { w.write(ev) }
}

// complete fills in what an event says of the rules in force.
func (w *rulesWatcher) complete(f *watchedFile, ev RulesEvent) RulesEvent {
	rs := w.g.current()
	if ev.Agent == "" {
		ev.Agent = rs.agent
	}
	ev.Time = w.g.now().UTC()
	ev.File = f.path
	ev.Allow = NewRulesFile("", rs.rules).Allow
	ev.Serial = rs.serial
	return ev
}

func (w *rulesWatcher) write(ev RulesEvent) {
	if w.log == nil {
		return
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	w.log.Write(append(line, '\n'))
}

func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRulesFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRulesFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxRulesFileSize)
	}
	return data, nil
}

// outsideCeiling is the rules the gateway's ceiling does not cover.
func (g *Gateway) outsideCeiling(rules []Rule) []Rule {
	if g.Ceiling == nil {
		return nil
	}
	return Uncovered(g.Ceiling, rules)
}

func ruleWords(rules []Rule) string {
	s := make([]string, len(rules))
	for i, r := range rules {
		s[i] = fmt.Sprintf("%q", r.String())
	}
	if len(s) == 1 {
		return "rule " + s[0] + " lies"
	}
	return "rules " + strings.Join(s, ", ") + " lie"
}

// String is the list, comma-separated.
func (f ForbidFile) String() string { return strings.Join(f.Forbid, ",") }
