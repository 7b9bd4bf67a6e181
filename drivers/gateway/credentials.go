package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/atomicfile"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/egress"
)

// Credentials (issue 18), what every driver that injects them shares: the
// agent's "credential_env" and "ca_hosts" attributes, the placeholder, the
// bottle's CA kept in the state directory, the gateway's credentials file
// and the variables that point the agent's TLS clients at the CA. How the
// file reaches the gateway and the CA the agent is the driver's.

// CredentialsName is the gateway's credentials file's name.
const CredentialsName = "credentials.json"

// Where the agent finds the bottle's CA.
const (
	AgentCADir    = "/etc/bottlefile"
	AgentCAFile   = AgentCADir + "/ca.pem"
	AgentCABundle = AgentCADir + "/ca-bundle.pem"
)

// CABundlePaths are where images and hosts keep their CA bundle.
var CABundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine, macOS
}

// TrustVars are the variables that point TLS clients in the agent at the
// bundle (or, for Node, the CA alone, added to its own).
var TrustVars = [][2]string{
	{"SSL_CERT_FILE", AgentCABundle},
	{"REQUESTS_CA_BUNDLE", AgentCABundle},
	{"GIT_SSL_CAINFO", AgentCABundle},
	{"NODE_EXTRA_CA_CERTS", AgentCAFile},
}

// CredentialEnvValue is an agent's "credential_env" attribute: the
// credentials' names to their env ("" for none); null without credentials,
// so that an agent without any keeps its configuration hash.
func CredentialEnvValue(creds cty.Value) (cty.Value, error) {
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

// CAHostsValue is an agent's "ca_hosts" attribute: the hosts its
// credentials go to, which the bottle's CA is name-constrained to
// (BottleCA), sorted, each once; null without credentials.
func CAHostsValue(creds cty.Value) (cty.Value, error) {
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

// PlanAgentCredentials sets an agent object's "credential_env" and
// "ca_hosts" from its credentials, only when it has some: an agent without
// keeps its configuration hash. Their names, env and hosts, never their
// values: a rotated value does not touch the agent, and new hosts (a new
// CA, which the agent must trust) replace it.
func PlanAgentCredentials(o *drivers.Object, creds cty.Value) error {
	credEnv, err := CredentialEnvValue(creds)
	if err != nil || credEnv.IsNull() {
		return err
	}
	caHosts, err := CAHostsValue(creds)
	if err != nil {
		return err
	}
	o.Attrs["credential_env"] = credEnv
	o.Attrs["ca_hosts"] = caHosts
	return nil
}

// AgentCredentialEnv is what an agent object with credentials adds to its
// env at create: each credential's placeholder in its env and the trust
// variables, but a variable set reports already set. Nil without
// credentials.
func AgentCredentialEnv(o drivers.Object, lineage, agent string, set func(name string) bool) ([][2]string, error) {
	v := o.Attr("credential_env")
	if v.IsNull() {
		return nil, nil
	}
	envs, err := drivers.StringMap(v)
	if err != nil {
		return nil, fmt.Errorf("credential_env: %w", err)
	}
	if len(envs) == 0 {
		return nil, nil
	}
	out := [][2]string{}
	added := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(envs)) {
		if env := envs[name]; env != "" && !set(env) && !added[env] {
			out = append(out, [2]string{env, Placeholder(lineage, agent, name)})
			added[env] = true
		}
	}
	for _, kv := range TrustVars {
		if !set(kv[0]) && !added[kv[0]] {
			out = append(out, kv)
		}
	}
	return out, nil
}

// AgentCAHosts is an agent object's "ca_hosts", nil when null.
func AgentCAHosts(o drivers.Object) ([]string, error) {
	v := o.Attr("ca_hosts")
	if v.IsNull() {
		return nil, nil
	}
	hosts, err := drivers.Strings(v)
	if err != nil {
		return nil, fmt.Errorf("ca_hosts: %w", err)
	}
	return hosts, nil
}

// Placeholder is what an agent holds in a credential's env instead of its
// value: derived from the lineage, the agent and the credential's name, so
// it never changes with the value, and the gateway recognises it.
func Placeholder(lineage, agent, name string) string {
	h := sha256.Sum256([]byte("bottlefile credential placeholder\x00" + lineage + "\x00" + agent + "\x00" + name))
	return fmt.Sprintf("bottlefile-placeholder-%s-%s", name, hex.EncodeToString(h[:12]))
}

// caMu serializes making a bottle's CA: the agent's create and the
// gateway's may run at once.
var caMu sync.Mutex

// BottleCA returns the bottle's CA, name-constrained to hosts (its
// credential hosts), made on first use and kept in the state directory;
// made anew when the kept one is constrained to other hosts (or to none:
// made before CAs were). The agent's "ca_hosts" attribute holds the same
// hosts, so that an agent whose CA changes is replaced.
func BottleCA(log hclog.Logger, stateDir, lineage, agent string, hosts []string) (certPEM, keyPEM []byte, err error) {
	if stateDir == "" {
		return nil, nil, errors.New("credentials need a state directory to keep the bottle's CA in")
	}
	dir := CADir(stateDir, lineage, agent)
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
	log.Info("made the bottle's CA", "agent", agent, "dir", dir, "hosts", hosts)
	return certPEM, keyPEM, nil
}

// ForgetCA removes the bottle's CA (BottleCA), for a driver's
// ForgetBottle: once the state records nothing of the bottle, its key has
// no use left and must not stay on disk. The lineage's directory goes
// with its last bottle.
func ForgetCA(log hclog.Logger, stateDir, lineage, agent string) error {
	// Names from the state, but never a path out of the state directory.
	if stateDir == "" || !filepath.IsLocal(lineage) || !filepath.IsLocal(agent) || strings.ContainsRune(lineage+agent, filepath.Separator) {
		return nil
	}
	caMu.Lock()
	defer caMu.Unlock()
	dir := CADir(stateDir, lineage, agent)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing the bottle's CA: %w", err)
	}
	log.Info("removed the bottle's CA", "agent", agent, "dir", dir)
	_ = os.Remove(filepath.Dir(dir)) // the lineage's, only when empty
	return nil
}

// CADir is where a bottle's CA is kept: credentials/LINEAGE/agent.NAME
// in the state directory.
func CADir(stateDir, lineage, agent string) string {
	return filepath.Join(stateDir, "credentials", lineage, agent)
}

// HostCABundle is the CA bundle of the machine running bottlefile, or nil.
func HostCABundle() []byte {
	for _, p := range CABundlePaths {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return b
		}
	}
	return nil
}

// CABundle is bundle followed by the CA certificate: what the agent's
// SSL_CERT_FILE names, so that it still trusts every host it did.
func CABundle(bundle, cert []byte) []byte {
	out := slices.Clone(bundle)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, cert...)
}

// NewCredentialsFile is the credentials file of the gateway object o: the
// bottle's CA when it has credentials, a fresh version, the CAs it
// verifies the destinations against (the host's bundle and the runtime's
// credential_ca_file, caFile, when set) and the credentials with their
// placeholders. It holds the values: never log it.
func NewCredentialsFile(log hclog.Logger, stateDir, lineage, agent string, o drivers.Object, caFile string) (egress.CredentialsFile, error) {
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
	cert, key, err := BottleCA(log, stateDir, lineage, agent, hosts)
	if err != nil {
		return f, err
	}
	f.CACert, f.CAKey = string(cert), string(key)
	upstream := HostCABundle()
	if caFile != "" {
		extra, err := os.ReadFile(caFile)
		if err != nil {
			return f, fmt.Errorf("credential_ca_file: %w", err)
		}
		upstream = append(append(upstream, '\n'), extra...)
	}
	f.UpstreamCAs = string(upstream)
	for _, c := range creds {
		f.Credentials = append(f.Credentials, egress.Credential{
			Name: c.Name, Host: c.Host, Port: c.Port, Header: c.Header, Prefix: c.Prefix, Value: c.Value,
			Placeholder: Placeholder(lineage, agent, c.Name),
		})
	}
	return f, nil
}
