// Command tracesum reads the log of one bottlefile command run with
// BOTTLEFILE_LOG=trace (stderr) and says where its time went: the engine
// calls by phase (count, summed time, wall time they covered), the time
// no engine call was in flight (bottlefile's own, or waiting), what came
// after the last container start, and per object the span of its calls.
//
//	BOTTLEFILE_LOG=trace bottlefile apply -auto-approve 2>trace.log
//	go run ./bench/tracesum trace.log
//
// The run's span is from the first to the last line of the log; -total
// (the wall time measured outside, e.g. 3.2s) extends it to what the
// process took.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// call is one engine call of the trace.
type call struct {
	n          int
	verb, obj  string // "POST /containers/{}/start", its object (name or short ID)
	id         string // a create's answer
	start, end time.Time
	phase      string
}

var (
	lineTime = regexp.MustCompile(`^(\S+) \[(\w+)\]\s+(\S+): (.*?)(?::\s+(.*))?$`)
	kv       = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)
)

func main() {
	total := flag.Duration("total", 0, "the command's wall time, measured outside (extends the span to it)")
	flag.Parse()
	var in io.Reader = os.Stdin
	if flag.NArg() > 0 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracesum:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	calls, first, last, err := read(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracesum:", err)
		os.Exit(1)
	}
	if len(calls) == 0 {
		fmt.Fprintln(os.Stderr, "tracesum: no engine calls in the log (was BOTTLEFILE_LOG=trace set?)")
		os.Exit(1)
	}
	if *total > 0 && first.Add(*total).After(last) {
		last = first.Add(*total)
	}
	report(os.Stdout, calls, first, last)
}

// read parses the log: engine call lines, and the first and last times.
func read(in io.Reader) ([]*call, time.Time, time.Time, error) {
	var calls []*call
	var first, last time.Time
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lineTime.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		if m[4] != "engine call" {
			continue
		}
		f := fields(m[5])
		c := &call{verb: f["call"], obj: f["object"], id: f["id"]}
		c.n, _ = strconv.Atoi(f["n"])
		if c.start, err = time.Parse(time.RFC3339Nano, f["start"]); err != nil {
			return nil, first, last, fmt.Errorf("call %d: start %q: %v", c.n, f["start"], err)
		}
		took, err := time.ParseDuration(f["took"])
		if err != nil {
			return nil, first, last, fmt.Errorf("call %d: took %q: %v", c.n, f["took"], err)
		}
		c.end = c.start.Add(took)
		if c.start.Before(first) {
			first = c.start
		}
		if c.end.After(last) {
			last = c.end
		}
		calls = append(calls, c)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].start.Before(calls[j].start) })
	return calls, first, last, sc.Err()
}

func fields(s string) map[string]string {
	out := map[string]string{}
	for _, m := range kv.FindAllStringSubmatch(s, -1) {
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		out[m[1]] = v
	}
	return out
}

// Phases, in the order reported.
const (
	phPlan     = "plan/refresh (reads before the first change)"
	phNetwork  = "network creates and connects"
	phCreate   = "container creates (agents, sidecars)"
	phStart    = "container starts (agents, sidecars)"
	phGateway  = "gateways: create, files, start, readiness, forbid pushes"
	phProbe    = "engine host probe"
	phImage    = "images: inspect, import, build, commit"
	phWatch    = "watch after start (inspections)"
	phRemove   = "removals"
	phRead     = "other reads (lists, inspects)"
	phSnapshot = "snapshots (commit, size)"
)

var order = []string{phPlan, phNetwork, phCreate, phStart, phGateway, phProbe, phImage, phWatch, phSnapshot, phRemove, phRead}

// classify gives each call its phase. Objects are tied to names by the
// creates' answers: a gateway's container name ends in -gateway, the probe
// has no name.
func classify(calls []*call) {
	names := map[string]string{} // short ID -> name
	for _, c := range calls {
		if c.id != "" {
			name := c.obj
			if name == "" && c.verb == "POST /containers/create" {
				name = "(host probe)"
			}
			names[c.id] = name
		}
	}
	for _, c := range calls {
		if n, ok := names[c.obj]; ok && c.obj != "" {
			c.obj = n
		}
		// An agent's network and container have one name.
		if k := kindOf(c.verb); k != "" && c.obj != "" {
			c.obj = k + " " + c.obj
		}
	}
	firstChange := time.Time{}
	for _, c := range calls {
		if !strings.HasPrefix(c.verb, "GET ") && !strings.HasPrefix(c.verb, "HEAD ") {
			firstChange = c.start
			break
		}
	}
	started := map[string]time.Time{} // container -> end of its start
	for _, c := range calls {
		gw := strings.HasSuffix(c.obj, "-gateway")
		switch {
		case c.obj == "container (host probe)":
			c.phase = phProbe
		case (firstChange.IsZero() || c.start.Before(firstChange)) && (strings.HasPrefix(c.verb, "GET ") || strings.HasPrefix(c.verb, "HEAD ")):
			c.phase = phPlan
		case strings.HasPrefix(c.verb, "DELETE ") || strings.HasSuffix(c.verb, "/kill") && !gw || strings.HasSuffix(c.verb, "/stop"):
			c.phase = phRemove
		case c.verb == "POST /networks/create" || strings.HasSuffix(c.verb, "/connect"):
			c.phase = phNetwork
		case gw || c.verb == "PUT /containers/{}/archive" || strings.HasSuffix(c.verb, "/kill") || strings.HasSuffix(c.verb, "/logs"):
			c.phase = phGateway
		case c.verb == "POST /containers/create":
			c.phase = phCreate
		case c.verb == "POST /containers/{}/start":
			c.phase = phStart
			started[c.obj] = c.end
		case strings.HasPrefix(c.verb, "POST /commit") || strings.Contains(c.verb, "/export"):
			c.phase = phSnapshot
		case strings.Contains(c.verb, "/images") || strings.HasPrefix(c.verb, "POST /build"):
			c.phase = phImage
		case c.verb == "GET /containers/{}/json" && !started[c.obj].IsZero():
			c.phase = phWatch
		default:
			c.phase = phRead
		}
	}
}

// kindOf is the kind of object a call is about: "container" for
// "POST /containers/{}/start".
func kindOf(verb string) string {
	_, p, _ := strings.Cut(verb, " /")
	k, _, _ := strings.Cut(p, "/")
	if k == "" || k == "_ping" || k == "info" {
		return ""
	}
	return strings.TrimSuffix(k, "s")
}

// interval is a span of time.
type interval struct{ a, b time.Time }

// union is the total time covered by the intervals.
func union(iv []interval) time.Duration {
	sort.Slice(iv, func(i, j int) bool { return iv[i].a.Before(iv[j].a) })
	var sum time.Duration
	var cur interval
	for i, x := range iv {
		if i == 0 {
			cur = x
			continue
		}
		if x.a.After(cur.b) {
			sum += cur.b.Sub(cur.a)
			cur = x
			continue
		}
		if x.b.After(cur.b) {
			cur.b = x.b
		}
	}
	return sum + cur.b.Sub(cur.a)
}

func sec(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

func report(w io.Writer, calls []*call, first, last time.Time) {
	classify(calls)
	span := last.Sub(first)
	fmt.Fprintf(w, "span %s (first log line to last), %d engine calls\n\n", sec(span), len(calls))
	fmt.Fprintf(w, "%-58s %5s %10s %10s %9s %9s\n", "phase", "calls", "summed", "wall", "from", "to")
	byPhase := map[string][]*call{}
	for _, c := range calls {
		byPhase[c.phase] = append(byPhase[c.phase], c)
	}
	for _, ph := range order {
		cs := byPhase[ph]
		if len(cs) == 0 {
			continue
		}
		var sum time.Duration
		var iv []interval
		from, to := cs[0].start, cs[0].end
		for _, c := range cs {
			sum += c.end.Sub(c.start)
			iv = append(iv, interval{c.start, c.end})
			if c.end.After(to) {
				to = c.end
			}
		}
		fmt.Fprintf(w, "%-58s %5d %10s %10s %8.3fs %8.3fs\n", ph, len(cs), sec(sum), sec(union(iv)), from.Sub(first).Seconds(), to.Sub(first).Seconds())
	}
	var all []interval
	lastStart, lastEnd := time.Time{}, time.Time{}
	for _, c := range calls {
		all = append(all, interval{c.start, c.end})
		if c.phase == phStart && c.end.After(lastStart) {
			lastStart = c.end
		}
		if c.end.After(lastEnd) {
			lastEnd = c.end
		}
	}
	busy := union(all)
	fmt.Fprintf(w, "\nat least one engine call in flight: %s; none: %s (%.0f%%): bottlefile's own work, its waits, and process start and exit\n",
		sec(busy), sec(span-busy), 100*(span-busy).Seconds()/span.Seconds())
	fmt.Fprintf(w, "  before the first call %s, after the last call ended %s\n", sec(calls[0].start.Sub(first)), sec(last.Sub(lastEnd)))
	if !lastStart.IsZero() {
		var after []interval
		for _, c := range calls {
			if c.end.After(lastStart) {
				a := c.start
				if a.Before(lastStart) {
					a = lastStart
				}
				after = append(after, interval{a, c.end})
			}
		}
		fmt.Fprintf(w, "after the last container start ended: %s (engine calls in flight for %s of it)\n", sec(last.Sub(lastStart)), sec(union(after)))
	}

	// By call: how many of each and their summed time, the most first:
	// what the engine was asked to do besides the creates and starts.
	type verbSum struct {
		verb string
		n    int
		sum  time.Duration
	}
	verbs := map[string]*verbSum{}
	for _, c := range calls {
		v := verbs[c.verb]
		if v == nil {
			v = &verbSum{verb: c.verb}
			verbs[c.verb] = v
		}
		v.n++
		v.sum += c.end.Sub(c.start)
	}
	vlist := make([]*verbSum, 0, len(verbs))
	for _, v := range verbs {
		vlist = append(vlist, v)
	}
	sort.Slice(vlist, func(i, j int) bool {
		if vlist[i].n != vlist[j].n {
			return vlist[i].n > vlist[j].n
		}
		return vlist[i].verb < vlist[j].verb
	})
	fmt.Fprintf(w, "\n%-40s %5s %10s\n", "call", "count", "summed")
	for _, v := range vlist {
		fmt.Fprintf(w, "%-40s %5d %10s\n", v.verb, v.n, sec(v.sum))
	}

	// Per object: the span from its first call to its last, and its
	// slowest call.
	type objSpan struct {
		name     string
		n        int
		from, to time.Time
		slow     *call
	}
	objs := map[string]*objSpan{}
	for _, c := range calls {
		if c.obj == "" || c.phase == phPlan || c.phase == phImage {
			continue
		}
		o := objs[c.obj]
		if o == nil {
			o = &objSpan{name: c.obj, from: c.start, to: c.end}
			objs[c.obj] = o
		}
		o.n++
		if c.end.After(o.to) {
			o.to = c.end
		}
		if o.slow == nil || c.end.Sub(c.start) > o.slow.end.Sub(o.slow.start) {
			o.slow = c
		}
	}
	list := make([]*objSpan, 0, len(objs))
	for _, o := range objs {
		list = append(list, o)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].from.Before(list[j].from) })
	fmt.Fprintf(w, "\n%-40s %5s %9s %9s  %s\n", "object", "calls", "from", "to", "slowest call")
	for _, o := range list {
		fmt.Fprintf(w, "%-40s %5d %8.3fs %8.3fs  %s %s\n", o.name, o.n, o.from.Sub(first).Seconds(), o.to.Sub(first).Seconds(), o.slow.verb, sec(o.slow.end.Sub(o.slow.start)))
	}
}
