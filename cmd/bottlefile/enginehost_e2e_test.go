package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// engineHostBottlefile is an agent whose allowlist opens one port on every
// IPv4 address: only the gateway's forbid list stands between it and the
// engine host's services on that port.
const engineHostBottlefile = `
agent "coder" {
  image   = %q
  command = ["sleep", "600"]
  egress {
    allow = ["0.0.0.0/0:%d"]
  }
}
`

// TestE2EEngineHostAddressForbidden (issue 25): bottlefile reaches the
// engine through its local socket but runs in another network namespace
// (unshare --net), as it does when the engine lives in a VM or namespace:
// the addresses bottlefile sees on its own interfaces are not the engine
// host's. A service listens only on an address of the engine host that is
// no bridge gateway (on a veth the test makes); a plain container reaches
// it, so it is reachable from the engine's networks. An agent whose
// allowlist has 0.0.0.0/0:PORT is refused at the gateway all the same,
// because the driver learned the engine host's addresses from the engine.
func TestE2EEngineHostAddressForbidden(t *testing.T) {
	parallel(t)
	if os.Geteuid() != 0 {
		if os.Getenv(dockertest.RequireEnv) == "1" {
			t.Fatal("making an interface and a network namespace needs root")
		}
		t.Skip("making an interface and a network namespace needs root")
	}
	for _, tool := range []string{"ip", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	ctx := context.Background()

	// An address of this machine (the engine's host) that no network of
	// the engine, no bottle pool and no interface uses.
	addr := hostOnlyAddr(t, cli)
	link := "bflk" + randomHex(3)
	ipCmd(t, "link", "add", link, "type", "veth", "peer", "name", link+"p")
	t.Cleanup(func() { exec.Command("ip", "link", "del", link).Run() })
	ipCmd(t, "addr", "add", addr.String()+"/32", "dev", link)
	ipCmd(t, "link", "set", link, "up")

	secret := "engine-host-service-" + randomHex(8)
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, secret+"\n") }), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(addr, uint16(port)))

	// Control: from a container on the engine's default bridge, the
	// service answers.
	if out := runOnBridge(t, cli, img, "timeout 5 wget -qO- "+shellQuote(url)); !strings.Contains(out, secret) {
		t.Fatalf("control: a container on the default bridge does not reach %s (%q); the test would prove nothing", url, out)
	}

	dir := t.TempDir()
	writeBottlefile(t, dir, engineHostBottlefile, img, port)
	apply := exec.Command("unshare", "--net", "--", binary, "-chdir="+dir, "apply", "-auto-approve")
	apply.Env = append(os.Environ(), "NO_COLOR=1", "BOTTLEFILE_LOG=debug")
	var out, errb bytes.Buffer
	apply.Stdout, apply.Stderr = &out, &errb
	err = apply.Run()
	if _, rerr := os.Stat(dir + "/.bottlefile/state.db"); rerr == nil {
		lineageOf(t, cli, dir)
	}
	if err != nil {
		t.Fatalf("apply in its own network namespace: %v\n%s\n%s", err, out.String(), errb.String())
	}
	lineage, _ := readState(t, dir)

	agent, gateway := "", container.Summary{}
	for _, c := range containersWith(t, cli, drivers.LabelLineage+"="+lineage) {
		switch {
		case c.Labels["io.bottlefile.kind"] == "gateway":
			gateway = c
		case c.Labels[drivers.LabelAddress] == "agent.coder":
			agent = c.ID
		case c.Labels["io.bottlefile.kind"] == "host-probe":
			t.Errorf("the engine host probe %s was left behind", c.ID[:12])
		}
	}
	if agent == "" || gateway.ID == "" {
		t.Fatalf("agent %q, gateway %q", agent, gateway.ID)
	}
	insp, err := cli.ContainerInspect(ctx, gateway.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(insp.Config.Cmd, addr.String()+"/32") {
		t.Errorf("the gateway's forbid list lacks the engine host's %s: %q", addr, insp.Config.Cmd)
	}

	probes := []probe{
		{"via proxy", viaProxy(url)},
		{"CONNECT", connect("gateway", netip.AddrPortFrom(addr, uint16(port)).String())},
	}
	res := map[string]execResult{}
	for _, p := range probes {
		o, code := dockertest.Exec(t, cli, agent, "sh", "-c", p.cmd)
		res[p.name] = execResult{out: o, code: code}
	}
	for _, p := range probes {
		want403(t, res, p.name, secret)
	}
	t.Logf("engine host address %s:%d refused: %q", addr, port, res["via proxy"].out)
	for _, line := range strings.Split(errb.String(), "\n") {
		if strings.Contains(line, "engine host") {
			t.Log(line)
		}
	}
}

// hostOnlyAddr picks an address in 10.251.0.0/16 that no engine network,
// bottle pool or interface of this machine uses.
func hostOnlyAddr(t *testing.T, cli *client.Client) netip.Addr {
	t.Helper()
	nets, err := cli.NetworkList(context.Background(), network.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var used []netip.Prefix
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil {
				used = append(used, p)
			}
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				used = append(used, p)
			}
		}
	}
	for range 100 {
		a := netip.AddrFrom4([4]byte{10, 251, byte(rand.IntN(256)), byte(1 + rand.IntN(250))})
		if !slices.ContainsFunc(used, func(p netip.Prefix) bool { return p.Contains(a) }) {
			return a
		}
	}
	t.Fatal("no free address in 10.251.0.0/16")
	return netip.Addr{}
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// runOnBridge runs a shell script in a throwaway container on the engine's
// default bridge network, labelled for the test helpers' cleanup and
// removed afterwards, and returns what it printed.
func runOnBridge(t *testing.T, cli *client.Client, img, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"sh", "-c", script}, Labels: map[string]string{dockertest.TestLabel: "1"}},
		&container.HostConfig{NetworkMode: "bridge"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	wait, errc := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-wait:
	case err := <-errc:
		t.Fatal(err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, logs)
	return out.String()
}
