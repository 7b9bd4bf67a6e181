package engine

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TraceMessage is the message of the trace line each engine call logs
// (BOTTLEFILE_LOG=trace); bench/tracesum reads them.
const TraceMessage = "engine call"

// tracer wraps an engine client's transport: each call logs one trace
// line when its answer has been read to the end (or closed), with when it
// started, how long the engine took to answer and to finish, and the
// object it was about. Streams (logs -f, build, pull) are timed to their
// end, so a call's span is what the caller waited for.
type tracer struct {
	next http.RoundTripper
	log  hclog.Logger
	seq  atomic.Int64
}

// traceTime is the layout of a trace line's start: UTC, microseconds.
const traceTime = "2006-01-02T15:04:05.000000Z"

func (t *tracer) RoundTrip(req *http.Request) (*http.Response, error) {
	call, obj := callOf(req)
	n := t.seq.Add(1)
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.log.Trace(TraceMessage, "n", n, "call", call, "object", obj, "start", start.UTC().Format(traceTime),
			"took", ms(time.Since(start)), "error", err.Error())
		return resp, err
	}
	head := time.Since(start)
	b := &tracedBody{ReadCloser: resp.Body}
	if strings.HasSuffix(call, "/create") && req.Method == http.MethodPost && !strings.HasPrefix(call, "POST /images") {
		// A create's answer names the ID later calls use: kept, so
		// that the trace ties them to the object.
		b.keep = &bytes.Buffer{}
	}
	b.done = func() {
		kv := []any{"n", n, "call", call, "object", obj, "start", start.UTC().Format(traceTime),
			"head", ms(head), "took", ms(time.Since(start)), "status", resp.StatusCode}
		if b.keep != nil {
			var v struct{ ID string }
			if json.Unmarshal(b.keep.Bytes(), &v) == nil && len(v.ID) >= 12 {
				kv = append(kv, "id", v.ID[:12])
			}
		}
		t.log.Trace(TraceMessage, kv...)
	}
	resp.Body = b
	return resp, nil
}

// ms is a duration to the microsecond, as time.Duration spells it.
func ms(d time.Duration) string { return d.Round(time.Microsecond).String() }

// tracedBody calls done once: at the end of the body or at its close,
// whichever comes first.
type tracedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
	keep *bytes.Buffer // the first 4 KiB read, when wanted
}

func (b *tracedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.keep != nil && b.keep.Len() < 4<<10 {
		b.keep.Write(p[:min(n, 4<<10-b.keep.Len())])
	}
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *tracedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

var (
	// apiVersion is the /v1.41 prefix of a versioned call.
	apiVersion = regexp.MustCompile(`^/v[0-9.]+`)
	// imagePath is a call on one image, whose name may hold slashes.
	imagePath = regexp.MustCompile(`^/images/(.+)/(json|history|push|tag|get)$`)
	// objectPath is a call on one object: /containers/ID/start.
	objectPath = regexp.MustCompile(`^/(containers|networks|images|volumes|services|tasks|nodes|configs|secrets|exec|plugins)/([^/]+)(/.*)?$`)
)

// collectionVerb are the calls on a kind rather than on one object:
// /images/load, /containers/create.
var collectionVerb = map[string]bool{"create": true, "json": true, "prune": true, "load": true, "get": true, "search": true, "import": true}

// callOf names a call as "METHOD /kind/{}/verb" and the object it is
// about: the path's ID or name, a create's name (query or body).
func callOf(req *http.Request) (call, obj string) {
	p := apiVersion.ReplaceAllString(req.URL.Path, "")
	if m := imagePath.FindStringSubmatch(p); m != nil {
		return req.Method + " /images/{}/" + m[2], m[1]
	}
	if m := objectPath.FindStringSubmatch(p); m != nil && !collectionVerb[m[2]] {
		obj, _ = url.PathUnescape(m[2])
		if len(obj) == 64 {
			obj = obj[:12]
		}
		p = "/" + m[1] + "/{}" + m[3]
	}
	if strings.HasSuffix(p, "/create") && obj == "" {
		obj = req.URL.Query().Get("name")
		if obj == "" {
			obj = bodyName(req)
		}
	}
	return req.Method + " " + p, obj
}

// bodyName is the Name of a create's JSON body (a network's), read from a
// copy of the body.
func bodyName(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	rc, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64<<10))
	if err != nil {
		return ""
	}
	var v struct{ Name string }
	if json.NewDecoder(bytes.NewReader(b)).Decode(&v) != nil {
		return ""
	}
	return v.Name
}
