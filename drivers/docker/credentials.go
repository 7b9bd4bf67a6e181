package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/gateway"
	"github.com/bottlefile/bottlefile/egress"
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
	credentialsName = gateway.CredentialsName

	// labelBottleCA marks an agent container the bottle's CA was copied
	// into at create: what it wrote leaves those files out (seededBytes).
	labelBottleCA = drivers.LabelPrefix + "bottle-ca"

	// Where the agent finds the bottle's CA.
	agentCADir    = gateway.AgentCADir
	agentCAFile   = gateway.AgentCAFile
	agentCABundle = gateway.AgentCABundle
)

// caBundlePaths are where images and hosts keep their CA bundle.
var caBundlePaths = gateway.CABundlePaths

// placeholder is gateway.Placeholder.
func placeholder(lineage, agent, name string) string {
	return gateway.Placeholder(lineage, agent, name)
}

// bottleCA is gateway.BottleCA in the driver's state directory.
func (d *Driver) bottleCA(lineage, agent string, hosts []string) (certPEM, keyPEM []byte, err error) {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	return gateway.BottleCA(d.log, stateDir, lineage, agent, hosts)
}

var _ drivers.BottleForgetter = (*Driver)(nil)

// ForgetBottle removes the bottle's CA (gateway.ForgetCA) once the state
// records nothing of the bottle.
func (d *Driver) ForgetBottle(lineage, agent string) error {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	return gateway.ForgetCA(d.log, stateDir, lineage, agent)
}

// credentialsFile is the gateway's credentials file for the gateway
// object o (gateway.NewCredentialsFile), trusting the runtime's
// credential_ca_file too. It holds the values: never log it.
func (d *Driver) credentialsFile(lineage, agent string, o drivers.Object) (egress.CredentialsFile, error) {
	d.mu.RLock()
	stateDir := d.stateDir
	d.mu.RUnlock()
	ec, _ := d.egressConf()
	return gateway.NewCredentialsFile(d.log, stateDir, lineage, agent, o, ec.credentialCAFile)
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
	set := map[string]bool{}
	for _, kv := range cfg.Env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	// The agent's named address, as the gateway's file and the bottle's
	// CA have it: a moved agent's container made again keeps the
	// placeholders its gateway recognises.
	env, err := gateway.AgentCredentialEnv(req.Object, req.Lineage, req.NamedAddr(gateway.AgentOf(req.Object.Addr)), func(k string) bool { return set[k] })
	if err != nil || env == nil {
		return false, err
	}
	for _, kv := range env {
		cfg.Env = append(cfg.Env, kv[0]+"="+kv[1])
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
	hosts, err := gateway.AgentCAHosts(req.Object)
	if err != nil {
		return err
	}
	cert, _, err := d.bottleCA(req.Lineage, req.NamedAddr(gateway.AgentOf(req.Object.Addr)), hosts)
	if err != nil {
		return err
	}
	bundle := gateway.CABundle(imageCABundle(ctx, api, id), cert)
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
