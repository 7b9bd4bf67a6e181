package docker

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
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

// TestRemoveNetworkActiveEndpoints: a network whose last container was
// removed a moment ago is removed once the engine lets go of its endpoint;
// one the engine holds an endpoint on with no container attached is an
// error that says it is dockerd's stale endpoint; one with a container
// still attached is the engine's own error; any other error is not
// retried.
func TestRemoveNetworkActiveEndpoints(t *testing.T) {
	active := errors.New("Error response from daemon: error while removing network: network bf-x id 0123 has active endpoints")
	for _, tc := range []struct {
		name      string
		failures  int // removes refused before one succeeds; -1: all of them
		attached  int
		wantErr   string // "" for success
		wantCalls int    // NetworkRemove calls at least
	}{
		{"let go after two tries", 2, 0, "", 3},
		{"stale endpoint", -1, 0, "a stale endpoint of dockerd's; restarting dockerd clears it", 2},
		{"container still attached", -1, 1, "has active endpoints", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			removes := 0
			api := &fakeAPI{
				NetworkRemoveFn: func(id string) error {
					removes++
					if tc.failures < 0 || removes <= tc.failures {
						return active
					}
					return nil
				},
				ContainerListFn: func(o container.ListOptions) ([]container.Summary, error) {
					if got := o.Filters.Get("network"); len(got) != 1 || got[0] != "0123" {
						t.Errorf("containers listed with network filter %v, want [0123]", got)
					}
					return make([]container.Summary, tc.attached), nil
				},
			}
			err := removeNetwork(t.Context(), api, "0123", 600*time.Millisecond)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("removeNetwork = %v, want %q", err, tc.wantErr)
			}
			if tc.wantErr != "" && !errors.Is(err, active) {
				t.Errorf("the engine's error is not kept: %v", err)
			}
			if removes < tc.wantCalls {
				t.Errorf("NetworkRemove called %d times, want at least %d", removes, tc.wantCalls)
			}
		})
	}

	t.Run("other errors are not retried", func(t *testing.T) {
		removes := 0
		refused := errors.New("permission denied")
		api := &fakeAPI{NetworkRemoveFn: func(string) error { removes++; return refused }}
		if err := removeNetwork(t.Context(), api, "0123", time.Second); !errors.Is(err, refused) || removes != 1 {
			t.Errorf("removeNetwork = %v after %d calls, want the error after 1", err, removes)
		}
	})
}
