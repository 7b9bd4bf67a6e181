package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-nope"}, 2, "flag provided but not defined: -nope"},
		{[]string{"extra"}, 2, `unexpected arguments ["extra"]`},
		{[]string{"-forbid", "not-a-cidr"}, 2, `"not-a-cidr" is neither an IP address nor a CIDR`},
		{[]string{"-poll", "0s"}, 2, "-poll 0s is not positive"},
		{[]string{"-h"}, 0, "-listen address"},
		{[]string{"-listen", "256.0.0.1:1"}, 1, "bottlefile gateway:"},
		{[]string{"-listen-in", "2001:db8:bf1e::/48"}, 1, "this machine has no address in 2001:db8:bf1e::/48"},
		{[]string{"-listen-in", "nope"}, 1, "-listen-in:"},
	} {
		var stdout, stderr strings.Builder
		code := Main(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("Main(%q) = %d, stderr %q; want %d with %q", tc.args, code, stderr.String(), tc.code, tc.msg)
		}
	}
}

// -listen-in picks the machine's address inside the block, on -listen's
// port.
func TestListenAddrIn(t *testing.T) {
	addrs := func() []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.7.5"), netip.MustParseAddr("172.18.0.3")}
	}
	for _, tc := range []struct{ listen, in, want, err string }{
		{":3128", "10.0.7.0/24", "10.0.7.5:3128", ""},
		{"0.0.0.0:8080", "172.18.0.0/16", "172.18.0.3:8080", ""},
		{":3128", "10.1.0.0/16", "", "no address in 10.1.0.0/16"},
		{"3128", "10.0.7.0/24", "", "-listen"},
	} {
		got, err := listenAddrIn(tc.listen, tc.in, addrs)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("listenAddrIn(%q, %q) = %q, %v; want %q, %q", tc.listen, tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestMainServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	writeRules(t, path, "agent.coder", "127.0.0.1:9", "203.0.113.0/24:443")
	stdout, stderr := newLineLog(), newLineLog()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"-listen", "127.0.0.1:0", "-rules", path, "-forbid", "203.0.113.0/24", "-poll", "1ms"}, stdout, stderr)
	}()
	stopped := false
	stop := func() int {
		if stopped {
			return 0
		}
		stopped = true
		cancel()
		return <-done
	}
	defer stop()

	// The rules are loaded before the gateway listens.
	stderr.waitFor(t, `"event":"rules-loaded"`, `"agent":"agent.coder"`)
	var listening struct {
		Event, Address string
		Forbidden      []string
	}
	if err := json.Unmarshal([]byte(stderr.waitFor(t, `"event":"listening"`)), &listening); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listening.Forbidden, "203.0.113.0/24") || !slices.Contains(listening.Forbidden, "127.0.0.1/32") {
		t.Fatalf("forbidden = %q: want -forbid and the gateway's own addresses", listening.Forbidden)
	}

	if code := Main(ctx, []string{"-health", "-listen", listening.Address}, nil, new(strings.Builder)); code != 0 {
		t.Fatalf("-health = %d", code)
	}

	connect := func(target string) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", listening.Address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&body)
		return resp.StatusCode, body.String()
	}
	for _, tc := range []struct{ target, reason string }{
		{"secret.test:443", "secret.test:443 is not in the allowlist of agent.coder"},
		{"127.0.0.1:9", "127.0.0.1:9 is a loopback address, which the gateway never connects to"},
		{"203.0.113.5:443", "203.0.113.5:443 is a forbidden address (in 203.0.113.0/24)"},
	} {
		code, body := connect(tc.target)
		if code != 403 || !strings.HasPrefix(body, "bottlefile egress: "+tc.reason) {
			t.Fatalf("CONNECT %s: %d %q", tc.target, code, body)
		}
		var d Decision
		if err := json.Unmarshal([]byte(stdout.next(t)), &d); err != nil {
			t.Fatal(err)
		}
		if d.Allowed || d.Destination != tc.target || !strings.HasPrefix(d.Reason, tc.reason) {
			t.Fatalf("decision %+v", d)
		}
	}

	writeRules(t, path, "agent.renamed")
	stderr.waitFor(t, `"event":"rules-loaded"`, `"agent":"agent.renamed"`)
	if code, body := connect("203.0.113.5:443"); code != 403 || !strings.Contains(body, "not in the allowlist of agent.renamed") {
		t.Fatalf("after reload: %d %q", code, body)
	}

	if code := stop(); code != 0 {
		t.Fatalf("Main returned %d after ctx was done; stderr:\n%s", code, stderr.String())
	}
	if code := Main(context.Background(), []string{"-health", "-listen", listening.Address}, nil, new(strings.Builder)); code != 1 {
		t.Fatalf("-health on a stopped gateway = %d", code)
	}
}

func TestDefaultGateways(t *testing.T) {
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"eth1\t00000000\tzz\t0003\n"
	got := defaultGateways(route)
	// The kernel prints the address word in host order; on little-endian
	// machines 172.17.0.1 is 010011AC.
	want := netip.AddrFrom4([4]byte{0xac, 0x11, 0, 1})
	if isBigEndian() {
		want = netip.AddrFrom4([4]byte{1, 0, 0x11, 0xac})
	}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("defaultGateways = %v, want [%v]", got, want)
	}
}

func isBigEndian() bool {
	return binary.NativeEndian.Uint16([]byte{0, 1}) == 1
}
