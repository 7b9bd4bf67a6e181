package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
)

// credentialBottlefile is one agent whose egress block injects a key into
// its requests to api-host (an HTTPS server on the test's outside network,
// its certificate from a test CA the gateways trust through
// credential_ca_file), and allows other-host (plain HTTP) too. %[5]s adds
// a snapshot block.
const credentialBottlefile = `
variable "key" {
  type      = string
  sensitive = true
}

runtime "local" {
  driver             = "docker"
  egress_network     = %q
  credential_ca_file = %q
}

agent "coder" {
  runtime = runtime.local
  image   = %q
  command = ["sleep", "3600"]
  egress {
    allow = %s
    credential "api" {
      host   = "api-host:8443"
      header = "x-api-key"
      value  = var.key
      env    = "API_KEY"
    }
  }
}
%s`

// TestE2ECredentials is issue 18's credential injection on the real
// engine. The agent, holding only a placeholder in API_KEY, sends a
// request to api-host with that placeholder in x-api-key: the server sees
// the real key (over HTTP/2, verified against its test CA by the
// gateway), and the agent verified the gateway's certificate for api-host
// against the bottle's CA, wired through SSL_CERT_FILE. No byte of the key
// is in the agent's docker inspect, its environment, its exported
// filesystem, a snapshot image, a snapshot export, the plan, the state or
// the gateway's logs. The placeholder sent to other-host is refused and
// logged; the agent cannot read the gateway's files or reach its other
// ports. A rotated key is applied to the gateway in place: the agent's
// container id and start time stay, and the next request carries the new
// key.
func TestE2ECredentials(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	r := &escapeRig{t: t, cli: cli, img: dockertest.BusyboxImage(t, cli), run: randomHex(4), dir: t.TempDir()}
	r.makeOutside()
	t.Cleanup(r.removeWorld)

	key := "sk-e2e-" + randomHex(12)
	rotated := "sk-e2e-rotated-" + randomHex(12)
	bin := buildStatic(t, "./testdata/credecho")
	echoImg := scratchImage(t, cli, bin, "credecho")
	caPEM, certPEM, keyPEM := testServerCert(t, "api-host")
	caFile := filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	apiID, apiIP := r.outsiderWithEnv("api-host", echoImg, []string{"/credecho", "serve"}, []string{"CERT=" + string(certPEM), "KEY=" + string(keyPEM)})
	_, otherIP := r.outsider("other-host", r.img, []string{"sh", "-c", "mkdir -p /www && echo other-host-content > /www/index.html && exec httpd -f -p 8080 -h /www"})
	if !r.waitLog(t, apiID, "listening", 10*time.Second) {
		t.Fatalf("api-host did not start: %s", r.logs(t, apiID))
	}

	allow := fmt.Sprintf(`["api-host:8443", "%s:8443", "other-host:8080", "%s:8080"]`, apiIP, otherIP)
	write := func(value, extra string) {
		t.Helper()
		writeBottlefile(t, r.dir, credentialBottlefile, r.outside, caFile, r.img, allow, extra)
		if err := os.WriteFile(filepath.Join(r.dir, "secret.vars"), []byte(fmt.Sprintf("key = %q\n", value)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(key, "")
	mustRun(t, r.dir, "validate")
	plan := mustRun(t, r.dir, "plan", "-var-file=secret.vars")
	if strings.Contains(plan.stdout+plan.stderr, key) {
		t.Errorf("the plan shows the key:\n%s", plan.stdout)
	}
	applied := bottlefile(t, r.dir, "apply", "-auto-approve", "-var-file=secret.vars")
	r.lineage = lineageOf(t, cli, r.dir) // cleans up by lineage, whatever apply left
	if applied.code != 0 {
		t.Fatalf("apply: %s", applied)
	}
	agent := r.find(t, "agent.coder")
	gw := r.find(t, "agent.coder.gateway")
	copyInto(t, cli, agent.id, "credecho", bin)

	// The agent holds the placeholder and the trust variables.
	env := r.execIn(t, agent.id, "env")
	placeholder := ""
	for _, line := range strings.Split(env.out, "\n") {
		if v, ok := strings.CutPrefix(line, "API_KEY="); ok {
			placeholder = strings.TrimSpace(v)
		}
	}
	if !strings.HasPrefix(placeholder, "bottlefile-placeholder-api-") {
		t.Fatalf("API_KEY in the agent is %q, want the placeholder; env:\n%s", placeholder, env.out)
	}
	wantAll(t, "agent env", env.out, "SSL_CERT_FILE=/etc/bottlefile/ca-bundle.pem", "NODE_EXTRA_CA_CERTS=/etc/bottlefile/ca.pem",
		"REQUESTS_CA_BUNDLE=/etc/bottlefile/ca-bundle.pem", "GIT_SSL_CAINFO=/etc/bottlefile/ca-bundle.pem")

	get := func() execResult {
		t.Helper()
		return r.execIn(t, agent.id, "/credecho get https://api-host:8443/v1/messages x-api-key API_KEY")
	}
	res := get()
	if res.code != 0 || !r.waitLog(t, apiID, "x-api-key="+key, 10*time.Second) {
		t.Fatalf("the server did not see the key: (exit %d) %s\napi-host log: %s\ngateway log: %s", res.code, res.out, r.logs(t, apiID), r.logs(t, gw.id))
	}
	wantAll(t, "request through the gateway", res.out, "status=200", "client-proto=HTTP/2.0", "proto=HTTP/2.0")
	// Issue 25: the server echoes the request, key and body, in its headers
	// and body, the key as is, in base64 and percent-encoded: the agent
	// gets the echo without the key in any of them.
	noReflection := func(what, out, secret string) {
		t.Helper()
		pct := ""
		for i := 0; i < len(secret); i++ {
			pct += fmt.Sprintf("%%%02X", secret[i])
		}
		for form, s := range map[string]string{"the key": secret, "its base64": base64.StdEncoding.EncodeToString([]byte(secret)), "its percent-encoding": pct} {
			if strings.Contains(strings.ToLower(out), strings.ToLower(s)) {
				t.Errorf("%s: the agent got %s (%s):\n%s", what, form, s, out)
			}
		}
	}
	noReflection("GET", res.out, key)
	wantAll(t, "the echo, masked", res.out, "x-api-key="+strings.Repeat("*", len(key)), "X-Echo-Key: "+strings.Repeat("*", len(key)))
	post := r.execIn(t, agent.id, "METHOD=POST BODY='hello from the agent' /credecho get https://api-host:8443/v1/messages x-api-key API_KEY")
	if post.code != 0 || !strings.Contains(post.out, "body=hello from the agent") {
		t.Errorf("POST with a body: (exit %d) %s", post.code, post.out)
	}
	noReflection("POST", post.out, key)
	trace := r.execIn(t, agent.id, "METHOD=TRACE /credecho get https://api-host:8443/v1/messages x-api-key API_KEY")
	if trace.code == 0 || !strings.Contains(trace.out, "status=403") || !strings.Contains(trace.out, "TRACE to a credential host is refused") {
		t.Errorf("TRACE to the credential host: (exit %d) %s", trace.code, trace.out)
	}
	noReflection("TRACE", trace.out, key)
	if !r.waitLog(t, gw.id, "TRACE to a credential host is refused", 10*time.Second) {
		t.Errorf("the gateway's log does not record the TRACE:\n%s", r.logs(t, gw.id))
	}
	// The CA the agent trusts is name-constrained to the credential host.
	agentCA := r.execIn(t, agent.id, "cat /etc/bottlefile/ca.pem").out
	if block, _ := pem.Decode([]byte(agentCA)); block == nil {
		t.Errorf("the agent's CA does not parse: %q", agentCA)
	} else if ca, err := x509.ParseCertificate(block.Bytes); err != nil || !ca.PermittedDNSDomainsCritical || fmt.Sprint(ca.PermittedDNSDomains) != "[api-host]" {
		t.Errorf("the agent's CA is constrained to %v (critical %v), want [api-host] (%v)", ca.PermittedDNSDomains, ca.PermittedDNSDomainsCritical, err)
	}
	if !r.waitLog(t, gw.id, "credential-injected", 10*time.Second) {
		t.Errorf("the gateway's log does not say it injected the credential:\n%s", r.logs(t, gw.id))
	}

	// The placeholder sent to another allowed host is refused and logged.
	other := r.execIn(t, agent.id, `timeout 10 wget -qO- --header "Authorization: Bearer $API_KEY" http://other-host:8080/ 2>&1`)
	if other.code == 0 || strings.Contains(other.out, "other-host-content") || !strings.Contains(other.out, "403") {
		t.Errorf("the placeholder reached other-host: (exit %d) %q", other.code, other.out)
	}
	if !r.waitLog(t, gw.id, "credential-elsewhere", 10*time.Second) || !r.waitLog(t, gw.id, "an attempt to use the credential elsewhere", time.Second) {
		t.Errorf("the gateway's log does not record the attempt:\n%s", r.logs(t, gw.id))
	}
	denials := mustRun(t, r.dir, "egress", "denials", "-var-file=secret.vars")
	wantAll(t, "egress denials", denials.stdout, "other-host:8080", "an attempt to use the credential elsewhere",
		"agent.coder (credentials injected in the last", "api-host:8443", `credential injected: "api" in header X-Api-Key`)
	if strings.Contains(denials.stdout, key) {
		t.Errorf("egress denials shows the key:\n%s", denials.stdout)
	}
	plainOther := r.execIn(t, agent.id, "timeout 10 wget -qO- http://other-host:8080/")
	if !strings.Contains(plainOther.out, "other-host-content") {
		t.Errorf("other-host without the placeholder: (exit %d) %q", plainOther.code, plainOther.out)
	}

	// The agent cannot read the gateway's files or reach its other ports.
	probes := []probe{{"credentials file through the proxy", viaProxy(fmt.Sprintf("http://%s:3128/etc/bottlefile/credentials.json", gw.ip))}}
	for _, port := range []int{22, 80, 443, 2375, 8080, 8443} {
		probes = append(probes, probe{fmt.Sprintf("gateway port %d", port), direct(fmt.Sprintf("http://%s:%d/", gw.ip, port))})
	}
	for name, got := range r.probeAll(t, agent.id, probes) {
		if got.code == 0 || strings.Contains(got.out, key) || strings.Contains(got.out, "BEGIN") {
			t.Errorf("%s: the agent got (exit %d) %q", name, got.code, got.out)
		}
	}

	// A snapshot of the agent, and its export.
	write(key, "\nsnapshot \"pre\" {\n  agent = agent.coder\n}\n")
	mustRun(t, r.dir, "apply", "-auto-approve", "-var-file=secret.vars")
	tarball := filepath.Join(t.TempDir(), "pre.tar")
	mustRun(t, r.dir, "snapshot", "export", "-var-file=secret.vars", "snapshot.pre", "-o", tarball)
	snapImage := ""
	_, recs := readState(t, r.dir)
	for _, rec := range recs {
		if rec.Addr == "snapshot.pre" {
			snapImage = rec.ID
		}
	}
	if snapImage == "" {
		t.Fatalf("no snapshot.pre in the state: %+v", recs)
	}

	// No byte of the key anywhere the agent, its snapshots or the records
	// could give it away.
	noKey := func(when, secret string) {
		t.Helper()
		_, raw, err := cli.ContainerInspectWithRaw(context.Background(), agent.id, false)
		if err != nil {
			t.Fatal(err)
		}
		where := map[string][]byte{"docker inspect of the agent": raw}
		_, rawGW, err := cli.ContainerInspectWithRaw(context.Background(), gw.id, false)
		if err != nil {
			t.Fatal(err)
		}
		where["docker inspect of the gateway"] = rawGW
		where["the agent's environment"] = []byte(r.execIn(t, agent.id, "env").out)
		where["the agent's filesystem (docker export)"] = readAllStream(t, func() (io.ReadCloser, error) { return cli.ContainerExport(context.Background(), agent.id) })
		where["the snapshot image (docker save)"] = readAllStream(t, func() (io.ReadCloser, error) {
			return cli.ImageSave(context.Background(), []string{snapImage})
		})
		if b, err := os.ReadFile(tarball); err == nil {
			where["snapshot export"] = b
		} else {
			t.Fatal(err)
		}
		where["the gateway's logs"] = []byte(r.logs(t, gw.id))
		filepath.WalkDir(filepath.Join(r.dir, ".bottlefile"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, err := os.ReadFile(p); err == nil {
					where["state file "+p] = b
				}
			}
			return nil
		})
		for what, b := range where {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s: %s holds the key", when, what)
			}
		}
		if !bytes.Contains(where["the agent's filesystem (docker export)"], []byte("BEGIN CERTIFICATE")) {
			t.Errorf("%s: the agent's filesystem holds no CA certificate: the check would not see a file", when)
		}
	}
	noKey("after apply", key)

	// Rotation: the gateway is updated in place, the agent untouched.
	before, err := cli.ContainerInspect(context.Background(), agent.id)
	if err != nil {
		t.Fatal(err)
	}
	write(rotated, "\nsnapshot \"pre\" {\n  agent = agent.coder\n}\n")
	plan = mustRun(t, r.dir, "plan", "-var-file=secret.vars")
	wantAll(t, "plan of a rotated key", plan.stdout, "~ agent.coder.gateway", "Plan: 0 to add, 1 to change, 0 to destroy.")
	if strings.Contains(plan.stdout, rotated) || strings.Contains(plan.stdout, key) {
		t.Errorf("the plan shows a key:\n%s", plan.stdout)
	}
	mustRun(t, r.dir, "apply", "-auto-approve", "-var-file=secret.vars")
	after, err := cli.ContainerInspect(context.Background(), agent.id)
	if err != nil {
		t.Fatalf("the agent's container is gone after the rotation: %v", err)
	}
	if after.ID != before.ID || after.State.StartedAt != before.State.StartedAt {
		t.Errorf("the rotation touched the agent: %s started %s, was %s started %s", after.ID, after.State.StartedAt, before.ID, before.State.StartedAt)
	}
	if now := r.find(t, "agent.coder.gateway"); now.id != gw.id {
		t.Errorf("the rotation replaced the gateway (%s, was %s)", now.id, gw.id)
	}
	res = get()
	if res.code != 0 || !r.waitLog(t, apiID, "x-api-key="+rotated, 10*time.Second) {
		t.Fatalf("after the rotation the server saw: (exit %d) %s\n%s", res.code, res.out, r.logs(t, apiID))
	}
	noReflection("GET after the rotation", res.out, rotated)
	noKey("after the rotation", rotated)
	if res := mustRun(t, r.dir, "plan", "-var-file=secret.vars"); !strings.Contains(res.stdout, "No changes.") {
		t.Errorf("plan after the rotation:\n%s", res.stdout)
	}
	// The bottle's CA, key included, is kept while the bottle lives and
	// goes with it.
	credDir := filepath.Join(r.dir, ".bottlefile", "credentials")
	if keys, _ := filepath.Glob(filepath.Join(credDir, "*", "agent.coder", "ca.key")); len(keys) != 1 {
		t.Errorf("the bottle's CA key before destroy: %v, want one", keys)
	}
	mustRun(t, r.dir, "destroy", "-auto-approve", "-var-file=secret.vars")
	if left, _ := os.ReadDir(credDir); len(left) != 0 {
		t.Errorf("after destroy %s still holds %v", credDir, left)
	}
}

// buildStatic builds a package of this module as a static binary.
func buildStatic(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// scratchImage imports a static binary as a FROM scratch image, /NAME,
// labelled as the tests' (reused while the binary is the same).
func scratchImage(t *testing.T, cli *client.Client, bin, name string) string {
	t.Helper()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	tag := "bottlefile-test/" + name + ":" + hex.EncodeToString(sum[:6])
	ctx := context.Background()
	if _, err := cli.ImageInspect(ctx, tag); err == nil {
		return tag
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Now()})
	tw.Write(data)
	tw.Close()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, tag, image.ImportOptions{
		Changes: []string{fmt.Sprintf("LABEL %s=1", dockertest.TestLabel)},
	})
	if err != nil {
		t.Fatalf("importing %s: %v", name, err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	return tag
}

// copyInto copies a file into a container's root, executable.
func copyInto(t *testing.T, cli *client.Client, id, name, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Now()})
	tw.Write(data)
	tw.Close()
	if err := cli.CopyToContainer(context.Background(), id, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		t.Fatalf("copying %s into %s: %v", name, id, err)
	}
}

func readAllStream(t *testing.T, open func() (io.ReadCloser, error)) []byte {
	t.Helper()
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testServerCert makes a test CA and a server certificate for name (a
// host name, or an IP address) signed by it, all PEM.
func testServerCert(t *testing.T, name string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bottlefile test upstream CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}
