package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"

	"github.com/bottlefile/bottlefile/atomicfile"
)

// Credentials (issue 18). An agent's egress block may hold credential
// blocks: the gateway injects each into the requests to its host
// (egress.Credential), and the agent never holds the value.
//
//   - The gateway object's "credentials" attribute is the evaluated list,
//     value and all (sensitive: the core records only its hash and never
//     shows it). It changes in place: the driver writes a new credentials
//     file into the running gateway and signals it; the agent is not
//     touched.
//   - The value reaches the gateway in that file alone, copied with
//     CopyToContainer into the gateway's /etc/bottlefile (credentialsTarFile):
//     never an environment variable, a command
//     line argument, a label or a log line, and never in the agent's
//     container, image or snapshots.
//   - The bottle's CA (egress.NewCA) is made on first use and kept in the
//     state directory (credentials/<lineage>/<agent>/, the key mode
//     0600): the gateway gets the key in the same file; the agent only the
//     certificate.
//   - The agent container's "credential_env" attribute maps each credential's
//     name to its env (so adding or removing one, or changing its env,
//     replaces the agent, and rotating a value does not). At create, its
//     env holds the credential's placeholder (placeholder), and the CA is
//     copied in before it starts: /etc/bottlefile/ca.pem, and
//     /etc/bottlefile/ca-bundle.pem, the image's own CA bundle (the first
//     of caBundlePaths it has) followed by the CA, so that SSL_CERT_FILE,
//     which replaces the system bundle for OpenSSL and Go, still trusts
//     every host the image did. SSL_CERT_FILE, REQUESTS_CA_BUNDLE and
//     GIT_SSL_CAINFO name the bundle, NODE_EXTRA_CA_CERTS (added to Node's
//     own) the CA alone. A variable the configuration sets is left alone.
//   - The gateway verifies the destinations against the CA bundle of the
//     host running bottlefile (the first of caBundlePaths it has) and the
//     runtime's credential_ca_file: a FROM scratch image has none of its
//     own.

const (
	credentialsName = "credentials.json"

	// labelBottleCA marks an agent container the bottle's CA was copied
	// into at create: what it wrote leaves those files out (seededBytes).
	labelBottleCA = drivers.LabelPrefix + "bottle-ca"

	// Where the agent finds the bottle's CA.
	agentCADir    = "/etc/bottlefile"
	agentCAFile   = agentCADir + "/ca.pem"
	agentCABundle = agentCADir + "/ca-bundle.pem"
)

// caBundlePaths are where images and hosts keep their CA bundle.
var caBundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine, macOS
}

// trustVars are the variables that point TLS clients in the agent at the
// bundle (or, for Node, the CA alone, added to its own).
var trustVars = [][2]string{
	{"SSL_CERT_FILE", agentCABundle},
	{"REQUESTS_CA_BUNDLE", agentCABundle},
	{"GIT_SSL_CAINFO", agentCABundle},
	{"NODE_EXTRA_CA_CERTS", agentCAFile},
}

// credentialEnvValue is an agent container's "credential_env" attribute: the
// credentials' names to their env ("" for none); null without credentials,
// so that a container without any keeps its configuration hash.
func credentialEnvValue(creds cty.Value) (cty.Value, error) {
	if creds == cty.NilVal {
		return cty.NullVal(cty.Map(cty.String)), nil
	}
	raw, _ := creds.UnmarkDeep()
	if raw.IsNull() {
		return cty.NullVal(cty.Map(cty.String)), nil
	}
	if !raw.IsKnown() {
		return cty.UnknownVal(cty.Map(cty.String)), nil
	}
	m := map[string]cty.Value{}
	for it := raw.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if !e.IsKnown() || e.IsNull() {
			return cty.UnknownVal(cty.Map(cty.String)), nil
		}
		name, env := e.GetAttr("name"), e.GetAttr("env")
		if !name.IsKnown() || !env.IsKnown() {
			return cty.UnknownVal(cty.Map(cty.String)), nil
		}
		if name.IsNull() {
			return cty.NilVal, errors.New("credentials: a credential without a name")
		}
		if env.IsNull() {
			env = cty.StringVal("")
		}
		m[name.AsString()] = env
	}
	if len(m) == 0 {
		return cty.NullVal(cty.Map(cty.String)), nil
	}
	return cty.MapVal(m), nil
}

// caHostsValue is an agent container's "ca_hosts" attribute: the hosts
// its credentials go to, which the bottle's CA is name-constrained to
// (bottleCA), sorted, each once; null without credentials.
func caHostsValue(creds cty.Value) (cty.Value, error) {
	if creds == cty.NilVal {
		return cty.NullVal(cty.List(cty.String)), nil
	}
	if raw, _ := creds.UnmarkDeep(); !raw.IsNull() && !raw.IsWhollyKnown() {
		return cty.UnknownVal(cty.List(cty.String)), nil
	}
	cs, err := drivers.DecodeCredentials(creds)
	if err != nil {
		return cty.NilVal, fmt.Errorf("credentials: %w", err)
	}
	var hosts []string
	for _, c := range cs {
		if h := strings.TrimSuffix(strings.ToLower(c.Host), "."); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return cty.NullVal(cty.List(cty.String)), nil
	}
	slices.Sort(hosts)
	vals := make([]cty.Value, len(hosts))
	for i, h := range hosts {
		vals[i] = cty.StringVal(h)
	}
	return cty.ListVal(vals), nil
}

// placeholder is what an agent holds in a credential's env instead of its
// value: derived from the lineage, the agent and the credential's name, so
// it never changes with the value, and the gateway recognises it.
func placeholder(lineage, agent, name string) string {
	h := sha256.Sum256([]byte("bottlefile credential placeholder\x00" + lineage + "\x00" + agent + "\x00" + name))
	return fmt.Sprintf("bottlefile-placeholder-%s-%s", name, hex.EncodeToString(h[:12]))
}

// caMu serializes making a bottle's CA: the agent's create and the
// gateway's may run at once.
var caMu sync.Mutex

// bottleCA returns the bottle's CA, name-constrained to hosts (its
// credential hosts), made on first use and kept in the state directory;
// made anew when the kept one is constrained to other hosts (or to none:
// made before CAs were). The agent's "ca_hosts" attribute holds the same
// hosts, so that an agent whose CA changes is replaced.
func (d *Driver) bottleCA(lineage, agent string, hosts []string) (certPEM, keyPEM []byte, err error) {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	if stateDir == "" {
		return nil, nil, errors.New("credentials need a state directory to keep the bottle's CA in")
	}
	dir := caDir(stateDir, lineage, agent)
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	caMu.Lock()
	defer caMu.Unlock()
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil && egress.CAConstrainedTo(certPEM, hosts) {
		return certPEM, keyPEM, nil
	}
	if !os.IsNotExist(cerr) && cerr != nil {
		return nil, nil, fmt.Errorf("reading the bottle's CA: %w", cerr)
	}
	if certPEM, keyPEM, err = egress.NewCA(agent, hosts); err != nil {
		return nil, nil, fmt.Errorf("making the bottle's CA: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("keeping the bottle's CA: %w", err)
	}
	// The key first: a certificate without its key is never left.
	if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, fmt.Errorf("keeping the bottle's CA: %w", err)
	}
	if err := atomicfile.Write(certPath, certPEM, 0o600); err != nil {
		return nil, nil, fmt.Errorf("keeping the bottle's CA: %w", err)
	}
	d.log.Info("made the bottle's CA", "agent", agent, "dir", dir, "hosts", hosts)
	return certPEM, keyPEM, nil
}

var _ drivers.BottleForgetter = (*Driver)(nil)

// ForgetBottle removes the bottle's CA (bottleCA) once the state records
// nothing of the bottle: its key has no use left, and must not stay on
// disk. The lineage's directory goes with its last bottle.
func (d *Driver) ForgetBottle(lineage, agent string) error {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	// Names from the state, but never a path out of the state directory.
	if stateDir == "" || !filepath.IsLocal(lineage) || !filepath.IsLocal(agent) || strings.ContainsRune(lineage+agent, filepath.Separator) {
		return nil
	}
	caMu.Lock()
	defer caMu.Unlock()
	dir := caDir(stateDir, lineage, agent)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the bottle's CA: %w", err)
	}
	d.log.Info("removed the bottle's CA", "agent", agent, "dir", dir)
	_ = os.Remove(filepath.Dir(dir)) // the lineage's, only when empty
	return nil
}

// caDir is where a bottle's CA is kept: credentials/LINEAGE/agent.NAME
// in the state directory.
func caDir(stateDir, lineage, agent string) string {
	return filepath.Join(stateDir, "credentials", lineage, agent)
}

// hostCABundle is the CA bundle of the machine running bottlefile, or nil.
func hostCABundle() []byte {
	for _, p := range caBundlePaths {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return b
		}
	}
	return nil
}

// credentialsFile is the gateway's credentials file for the gateway
// object o: the bottle's CA when it has credentials, a fresh version, and
// the credentials with their placeholders. It holds the values: never log
// it.
func (d *Driver) credentialsFile(lineage, agent string, o drivers.Object) (egress.CredentialsFile, error) {
	creds, err := drivers.DecodeCredentials(o.Attr("credentials"))
	if err != nil {
		return egress.CredentialsFile{}, fmt.Errorf("credentials: %w", err)
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return egress.CredentialsFile{}, err
	}
	f := egress.CredentialsFile{Version: hex.EncodeToString(nonce[:])}
	if len(creds) == 0 {
		return f, nil
	}
	hosts := make([]string, len(creds))
	for i, c := range creds {
		hosts[i] = c.Host
	}
	cert, key, err := d.bottleCA(lineage, agent, hosts)
	if err != nil {
		return f, err
	}
	f.CACert, f.CAKey = string(cert), string(key)
	upstream := hostCABundle()
	ec, _ := d.egressConf()
	if ec.credentialCAFile != "" {
		extra, err := os.ReadFile(ec.credentialCAFile)
		if err != nil {
			return f, fmt.Errorf("credential_ca_file: %w", err)
		}
		upstream = append(append(upstream, '\n'), extra...)
	}
	f.UpstreamCAs = string(upstream)
	for _, c := range creds {
		f.Credentials = append(f.Credentials, egress.Credential{
			Name: c.Name, Host: c.Host, Port: c.Port, Header: c.Header, Prefix: c.Prefix, Value: c.Value,
			Placeholder: placeholder(lineage, agent, c.Name),
		})
	}
	return f, nil
}

// credentialsTarFile is the credentials file as a tar entry for rulesTar.
// The engine makes what it copies in root's, so the file is readable by
// all in the gateway container (0444), where the gateway runs alone,
// without a shell: what matters is that it is in no other container.
func credentialsTarFile(f egress.CredentialsFile) (tarFile, error) {
	data, err := f.Marshal()
	if err != nil {
		return tarFile{}, err
	}
	return tarFile{name: credentialsName, data: data, mode: 0o444}, nil
}

// wireCredentials adds to an agent container's env, at create, its
// credentials' placeholders and the trust variables; it returns whether
// the container has credentials (and so needs the CA copied in).
func wireCredentials(req drivers.ApplyRequest, cfg *container.Config) (bool, error) {
	v := req.Object.Attr("credential_env")
	if v.IsNull() {
		return false, nil
	}
	envs, err := drivers.StringMap(v)
	if err != nil {
		return false, fmt.Errorf("credential_env: %w", err)
	}
	if len(envs) == 0 {
		return false, nil
	}
	set := map[string]bool{}
	for _, kv := range cfg.Env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	agent := gateway.AgentOf(req.Object.Addr)
	for _, name := range sortedKeys(envs) {
		if env := envs[name]; env != "" && !set[env] {
			cfg.Env = append(cfg.Env, env+"="+placeholder(req.Lineage, agent, name))
			set[env] = true
		}
	}
	for _, kv := range trustVars {
		if !set[kv[0]] {
			cfg.Env = append(cfg.Env, kv[0]+"="+kv[1])
		}
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[labelBottleCA] = "1"
	return true, nil
}

// seededBytes is the size, as they are now, of the files bottlefile
// itself put into a container's own layer at create (the bottle's CA and
// bundle, on a container labelled labelBottleCA), so that what a workload
// wrote leaves them out: a fresh agent with credentials has written
// nothing, whatever the size of its image's CA bundle. 0 without them.
func seededBytes(ctx context.Context, api dockerAPI, id string, labels map[string]string) int64 {
	if labels[labelBottleCA] == "" {
		return 0
	}
	var n int64
	for _, p := range []string{agentCAFile, agentCABundle} {
		if st, err := api.ContainerStatPath(ctx, id, p); err == nil && st.Mode.IsRegular() {
			n += st.Size
		}
	}
	return n
}

// written is a container's SizeRw less seededBytes, never below 0.
func written(ctx context.Context, api dockerAPI, id string, labels map[string]string, sizeRw int64) int64 {
	return max(sizeRw-seededBytes(ctx, api, id, labels), 0)
}

// copyCA copies the bottle's CA certificate into a created agent
// container, with the bundle: the image's own bundle, then the CA.
func (d *Driver) copyCA(ctx context.Context, api dockerAPI, id string, req drivers.ApplyRequest) error {
	var hosts []string
	if v := req.Object.Attr("ca_hosts"); !v.IsNull() {
		var err error
		if hosts, err = drivers.Strings(v); err != nil {
			return fmt.Errorf("ca_hosts: %w", err)
		}
	}
	cert, _, err := d.bottleCA(req.Lineage, req.NamedAddr(gateway.AgentOf(req.Object.Addr)), hosts)
	if err != nil {
		return err
	}
	bundle := imageCABundle(ctx, api, id)
	if len(bundle) > 0 && !bytes.HasSuffix(bundle, []byte("\n")) {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, cert...)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dir := strings.TrimPrefix(agentCADir, "/") + "/"
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{agentCAFile, cert}, {agentCABundle, bundle}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.name, "/"), Mode: 0o644, Size: int64(len(f.data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := api.CopyToContainer(ctx, id, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copying the bottle's CA into it: %w", err)
	}
	return nil
}

// imageCABundle is the CA bundle of a created container's image: the
// first regular file of caBundlePaths it has, or nil.
func imageCABundle(ctx context.Context, api dockerAPI, id string) []byte {
	for _, p := range caBundlePaths {
		rc, _, err := api.CopyFromContainer(ctx, id, p)
		if err != nil {
			continue
		}
		data, ok := firstRegular(rc)
		rc.Close()
		if ok && len(data) > 0 {
			return data
		}
	}
	return nil
}

// firstRegular reads the first entry of a tar stream when it is a regular
// file (at most 16 MiB).
func firstRegular(r io.Reader) ([]byte, bool) {
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil || h.Typeflag != tar.TypeReg || h.Size > 16<<20 {
		return nil, false
	}
	data, err := io.ReadAll(tr)
	return data, err == nil
}
