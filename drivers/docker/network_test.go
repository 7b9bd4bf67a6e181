package docker

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/bottlefile/bottlefile/drivers/engine"
)

// TestNetworkCreateAsksForDuplicateCheck: on an API 1.41 engine (which
// accepts a second network of a name unless asked), the client the driver
// makes sends CheckDuplicate with every network create. Containers need no
// such flag: the engine always refuses a second container of a name.
func TestNetworkCreateAsksForDuplicateCheck(t *testing.T) {
	var mu sync.Mutex
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			io.WriteString(w, "OK")
		case strings.HasSuffix(r.URL.Path, "/networks/create"):
			mu.Lock()
			defer mu.Unlock()
			if !strings.HasPrefix(r.URL.Path, "/v1.41/") {
				t.Errorf("create sent to %s, want API 1.41", r.URL.Path)
			}
			json.NewDecoder(r.Body).Decode(&body)
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"Id":"abc"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ep, err := engine.ForHost("test", "tcp://"+strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := newClient(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	if _, err := api.NetworkCreate(t.Context(), "bf-x", network.CreateOptions{Driver: "bridge", Internal: true}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if body["CheckDuplicate"] != true || body["Name"] != "bf-x" {
		t.Errorf("create request = %v, want CheckDuplicate true", body)
	}
}
