package docker

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// TestHostCache: a probe's answer is kept per engine ID and used until it
// is an hour old; another engine, an old answer, or a damaged file is no
// answer (the probe runs again).
func TestHostCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	file := hostCacheFile(t.TempDir())
	if want := filepath.Join(dir, "bottlefile", "engine-hosts.json"); file != want {
		t.Errorf("cache file %s, want %s (the user's cache directory)", file, want)
	}
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	addrs := []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("fd00::2")}
	if err := writeHostCache(file, "docker:A", addrs, now); err != nil {
		t.Fatal(err)
	}
	if err := writeHostCache(file, "docker:B", addrs[:1], now); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file: %v, %v; want mode 0600", fi, err)
	}
	if got, ok := readHostCache(file, "docker:A", now.Add(time.Hour)); !ok || !slices.Equal(got, addrs) {
		t.Errorf("engine A: %v, %v; want %v", got, ok, addrs)
	}
	if got, ok := readHostCache(file, "docker:B", now); !ok || !slices.Equal(got, addrs[:1]) {
		t.Errorf("engine B (written after A, A kept): %v, %v", got, ok)
	}
	for name, c := range map[string]struct {
		id  string
		now time.Time
	}{
		"another engine":     {"docker:C", now},
		"no engine ID":       {"", now},
		"older than an hour": {"docker:A", now.Add(hostCacheMaxAge + time.Second)},
		"probed in a future": {"docker:A", now.Add(-time.Hour)},
	} {
		if got, ok := readHostCache(file, c.id, c.now); ok {
			t.Errorf("%s: cached %v", name, got)
		}
	}
	os.WriteFile(file, []byte("{not json"), 0o600)
	if _, ok := readHostCache(file, "docker:A", now); ok {
		t.Error("a damaged file gave an answer")
	}
	if _, ok := readHostCache("", "docker:A", now); ok {
		t.Error("no state directory gave an answer")
	}
}

// TestEngineHostCachedNoProbe: with the engine's answer in the state
// directory, learning the engine host's addresses makes no container: it
// asks the engine's info only (the ID, the swarm address).
func TestEngineHostCachedNoProbe(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	api := &fakeAPI{InfoFn: func() (system.Info, error) {
		return system.Info{ID: "ENGINE1", Swarm: swarm.Info{NodeAddr: "10.77.0.5"}}, nil
	}}
	d := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { return api, nil })
	cfg := cty.ObjectVal(map[string]cty.Value{"host": cty.NullVal(cty.String), "subnet_pool": cty.StringVal(DefaultSubnetPool)})
	if err := d.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "test", Config: cfg, StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	id, err := d.EngineID(t.Context())
	if err != nil || id == "" {
		t.Fatalf("EngineID = %q, %v", id, err)
	}
	if err := writeHostCache(hostCacheFile(dir), id, []netip.Addr{netip.MustParseAddr("192.0.2.2")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got := d.engineHostOwnAddrs(t.Context(), api, testLineage)
	if want := []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("10.77.0.5")}; !slices.Equal(got, want) {
		t.Errorf("addrs = %v, want %v", got, want)
	}
	for _, c := range api.calls() {
		if c != "Info" {
			t.Errorf("engine call %s: a cached answer needs only the engine's info", c)
		}
	}
	// Another engine behind the same state: the cache does not answer, so
	// the probe runs (and fails here: the fake makes no container).
	api2 := &fakeAPI{InfoFn: func() (system.Info, error) { return system.Info{ID: "ENGINE2"}, nil }}
	d2 := newDriver(testLogger(t), func(engine.Endpoint) (dockerAPI, error) { return api2, nil })
	if err := d2.Configure(t.Context(), drivers.ConfigureRequest{Runtime: "test", Config: cfg, StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	if got := d2.engineHostOwnAddrs(t.Context(), api2, testLineage); len(got) != 0 {
		t.Errorf("another engine got %v from the cache", got)
	}
	id2, _ := d2.EngineID(t.Context())
	if _, ok := readHostCache(hostCacheFile(dir), id2, time.Now()); ok || id2 == id {
		t.Error("a failed probe was cached")
	}
}
