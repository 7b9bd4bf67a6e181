package engine

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestCallOf(t *testing.T) {
	for _, c := range []struct {
		method, url, body string
		call, obj         string
	}{
		{"POST", "/v1.41/containers/create?name=bf-1-a0", "", "POST /containers/create", "bf-1-a0"},
		{"POST", "/v1.41/networks/create", `{"Name":"bf-1-a0","Internal":true}`, "POST /networks/create", "bf-1-a0"},
		{"POST", "/v1.41/containers/" + strings.Repeat("ab", 32) + "/start", "", "POST /containers/{}/start", "abababababab"},
		{"GET", "/v1.41/images/bottlefile-bench/busybox:1/json", "", "GET /images/{}/json", "bottlefile-bench/busybox:1"},
		{"GET", "/v1.41/containers/json?all=1", "", "GET /containers/json", ""},
		{"DELETE", "/v1.41/networks/bf-1-a0", "", "DELETE /networks/{}", "bf-1-a0"},
		{"HEAD", "/_ping", "", "HEAD /_ping", ""},
		{"POST", "/v1.41/images/load?quiet=1", "", "POST /images/load", ""},
	} {
		req, err := http.NewRequest(c.method, "http://docker"+c.url, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		call, obj := callOf(req)
		if call != c.call || obj != c.obj {
			t.Errorf("%s %s: %q %q, want %q %q", c.method, c.url, call, obj, c.call, c.obj)
		}
		if b, _ := io.ReadAll(req.Body); string(b) != c.body {
			t.Errorf("%s %s: the body sent is %q, want %q", c.method, c.url, b, c.body)
		}
	}
}

// TestTracer: one trace line per call, when its answer has been read,
// with the create's answered ID; nothing below trace level.
func TestTracer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"Id":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}`)
	}))
	defer srv.Close()
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	hc := &http.Client{Transport: &tracer{next: http.DefaultTransport, log: log}}
	resp, err := hc.Post(srv.URL+"/v1.41/containers/create?name=bf-x", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("logged before the answer was read: %s", buf.String())
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	line := buf.String()
	for _, want := range []string{TraceMessage, `call="POST /containers/create"`, "object=bf-x", "id=0123456789ab", "status=200", "took=", "start=20"} {
		if !strings.Contains(line, want) {
			t.Errorf("trace line lacks %s: %s", want, line)
		}
	}
	if n := strings.Count(line, "\n"); n != 1 {
		t.Errorf("%d lines for one call: %s", n, line)
	}
}

// TestOpenTracedOnlyAtTrace: the tracer is added only when the log is at
// trace level; the client's transport is otherwise what Open makes.
func TestOpenTracedOnlyAtTrace(t *testing.T) {
	ep, err := ForHost("test", "unix:///var/run/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	for _, level := range []hclog.Level{hclog.Debug, hclog.Trace} {
		e, err := ep.OpenTraced(hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: level}))
		if err != nil {
			t.Fatal(err)
		}
		_, traced := e.Client.HTTPClient().Transport.(*tracer)
		if traced != (level == hclog.Trace) {
			t.Errorf("level %s: traced %v", level, traced)
		}
	}
}
