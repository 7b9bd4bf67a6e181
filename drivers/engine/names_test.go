package engine

import (
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/addrs"
)

const testLineage = "0123456789abcdef0123456789abcdef"

// TestInstanceNames: the instances of an agent with for_each or count get
// container, network and image names the engine takes, all different, and
// the container name reads back to the address.
func TestInstanceNames(t *testing.T) {
	tests := []struct {
		addr, container string
	}{
		{`agent.coder`, "bf-01234567-coder"},
		{`agent.coder["frontend"]`, "bf-01234567-coder__frontend"},
		{`agent.coder["0"]`, "bf-01234567-coder__0"},
		{`agent.coder[0]`, "bf-01234567-coder--0"},
		{`agent.coder[10]`, "bf-01234567-coder--10"},
		{`agent.my-bot["a-b_c"]`, "bf-01234567-my-bot__a-b_c"},
		{`agent.a--b[2]`, "bf-01234567-a--b--2"},
	}
	names := map[string]string{}
	repos := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, err := ObjectName(testLineage, tt.addr, KindContainer)
			if err != nil || got != tt.container {
				t.Fatalf("ObjectName = %q, %v; want %q", got, err, tt.container)
			}
			if prev, dup := names[got]; dup {
				t.Errorf("%s and %s share %q", prev, tt.addr, got)
			}
			names[got] = tt.addr
			if back, ok := AgentOfName(testLineage, got); !ok || back != tt.addr {
				t.Errorf("AgentOfName(%q) = %q, %v; want %q", got, back, ok, tt.addr)
			}
			a := addrs.MustParse(tt.addr)
			net, err := ObjectName(testLineage, a.Network().String(), KindNetwork)
			if err != nil || net != got {
				t.Errorf("network name = %q, %v; want the container's %q", net, err, got)
			}
			side, err := ObjectName(testLineage, a.Sidecar("git").String(), KindContainer)
			if err != nil || side != got+"-sidecar-git" {
				t.Errorf("sidecar name = %q, %v", side, err)
			}
			repo, err := ImageRepo(testLineage, a.Image().String())
			if err != nil || strings.ContainsAny(repo, `[]"_`) || repo != strings.ToLower(repo) {
				t.Errorf("image repo = %q, %v", repo, err)
			}
			if prev, dup := repos[repo]; dup {
				t.Errorf("%s and %s share the image repository %q", prev, tt.addr, repo)
			}
			repos[repo] = tt.addr
			ref, err := SnapshotRef(testLineage, a.PolicySnapshot(2).String(), tt.addr)
			if err != nil || !strings.HasSuffix(ref, "-snap:2") {
				t.Errorf("snapshot ref = %q, %v", ref, err)
			}
		})
	}
	if _, err := ObjectName(testLineage, `agent.coder["a b"]`, KindContainer); err == nil {
		t.Error("a key with a space gave a name")
	}
	if _, ok := AgentOfName(testLineage, "bf-ffffffff-coder"); ok {
		t.Error("a name of another lineage read back")
	}
}

// FuzzInstanceNames: every instance address of a block addrs accepts for
// instances gives a container name the engine takes that reads back.
func FuzzInstanceNames(f *testing.F) {
	f.Add("coder", "frontend", -1)
	f.Add("coder", "", 3)
	f.Add("a-", "_x", -1)
	f.Fuzz(func(t *testing.T, block, key string, n int) {
		k := addrs.IntKey(n)
		if n < 0 {
			k = addrs.StringKey(key)
		}
		a, err := addrs.Parse(addrs.AgentInstance(block, k).String())
		if err != nil || addrs.CheckInstancedName(block) != "" || !NamePart.MatchString(block) {
			return
		}
		name, err := ObjectName(testLineage, a.String(), KindContainer)
		if err != nil {
			t.Fatalf("ObjectName(%s): %v", a, err)
		}
		if back, ok := AgentOfName(testLineage, name); !ok || back != a.String() {
			t.Fatalf("%s -> %q -> %q, %v", a, name, back, ok)
		}
	})
}
