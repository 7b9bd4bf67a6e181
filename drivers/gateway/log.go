package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bottlefile/bottlefile/egress"
)

// event is one line a gateway writes on stderr (egress.RulesEvent and the
// "listening" event).
type event struct {
	Event         string   `json:"event"`
	Allow         []string `json:"allow"`
	Error         string   `json:"error"`
	TunnelsClosed int      `json:"tunnels_closed"`
	Version       string   `json:"version"` // of the credentials file
}

// Want is what a gateway must report in force: the allowlist and, when
// Version is set, the credentials file of that version.
type Want struct {
	Allow   []string
	Version string
}

// NewWant is what a gateway given the rules allow and the credentials
// file of credVersion ("" for none) must report: the rules in the form
// the gateway reports them.
func NewWant(allow []string, credVersion string) Want {
	want := Want{Allow: slices.Clone(allow), Version: credVersion}
	if rules, err := egress.ParseRules(allow); err == nil {
		want.Allow = egress.NewRulesFile("", rules).Allow
	}
	return want
}

// Log is what a gateway's event log says so far.
type Log struct {
	listening, rulesOK, credsOK bool
	// LastErr is the last rules or credentials error the gateway reported
	// and has not since recovered from.
	LastErr string
	// Closed counts the open tunnels the gateway closed as it took the
	// rules (and the forbid file it reads just before them).
	Closed       int
	forbidClosed int
}

// Ready reports whether the gateway took what it was given (and, when
// starting, listens).
func (st *Log) Ready(starting bool) bool {
	return st.rulesOK && st.credsOK && (st.listening || !starting)
}

// Add takes one line of the log.
func (st *Log) Add(line string, want Want) {
	var ev event
	if json.Unmarshal([]byte(line), &ev) != nil {
		return
	}
	if want.Version == "" {
		st.credsOK = true
	}
	switch ev.Event {
	case "listening":
		st.listening = true
	case "forbid-loaded":
		st.forbidClosed = ev.TunnelsClosed
	case "rules-loaded":
		st.rulesOK, st.LastErr = slices.Equal(ev.Allow, want.Allow), ""
		st.Closed, st.forbidClosed = ev.TunnelsClosed+st.forbidClosed, 0
	case "rules-invalid", "rules-unreadable":
		st.rulesOK, st.LastErr = false, ev.Error
	case "credentials-loaded":
		st.credsOK = want.Version == "" || ev.Version == want.Version
	case "credentials-invalid", "credentials-unreadable":
		st.credsOK, st.LastErr = false, ev.Error
	}
}

// Follow reads a starting gateway's event log (what it writes on stderr,
// as lines) until it listens with want in force, or the log ends. It
// returns what the log said and the lines read, for an error to quote.
// A line may carry details before its JSON (a service's log does).
func Follow(r io.Reader, want Want) (Log, string) {
	var st Log
	var log strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '{'); i > 0 && json.Valid([]byte(line[i:])) {
			line = line[i:]
		}
		log.WriteString(line + "\n")
		st.Add(line, want)
		if st.Ready(true) {
			break
		}
	}
	return st, log.String()
}

// Wait is Follow for a reader that ends when the gateway exits: how many
// open tunnels the gateway closed as it took its rules, or an error that
// quotes the log when the log ends first or the gateway rejects its rules.
func Wait(r io.Reader, allow []string) (int, error) {
	st, log := Follow(r, NewWant(allow, ""))
	if st.Ready(true) {
		return st.Closed, nil
	}
	if st.LastErr != "" {
		return 0, fmt.Errorf("the gateway did not take its rules: %s", st.LastErr)
	}
	return 0, fmt.Errorf("the gateway's log ended before it was ready; its log:\n%s", Indent(log))
}

// Indent is the last 20 lines of a log, indented, to quote in an error.
func Indent(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "    (empty)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
