package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker/dockertest"
	"github.com/bottlefile/bottlefile/drivers/engine/enginetest"
)

// remoteConfig is two agents on a runtime "remote" whose block is the
// first argument's lines.
const remoteConfig = `
runtime "remote" {
  driver = "docker"
%s
}

agent "coder" {
  runtime = runtime.remote
  image   = %[2]q
  command = ["sleep", "600"]
}

agent "reviewer" {
  runtime = runtime.remote
  image   = %[2]q
  command = ["sleep", "600"]
}
`

// remoteLifecycle applies the two agents through the runtime, checks they
// run on the engine (the local one, behind the remote address) with
// their labels, that a second plan has no changes, that exec reaches an
// agent through the same connection (a hijacked stream), and that
// destroy leaves nothing of the lineage.
func remoteLifecycle(t *testing.T, dir string) {
	t.Helper()
	cli := dockertest.Client(t)
	if r := mustRun(t, dir, "validate"); !strings.Contains(r.stdout, "valid") {
		t.Errorf("validate: %s", r)
	}
	mustRun(t, dir, "apply", "-auto-approve")
	lineage := lineageOf(t, cli, dir)
	for _, a := range []string{"agent.coder", "agent.reviewer"} {
		got := containersWith(t, cli, drivers.LabelAddress+"="+a, drivers.LabelLineage+"="+lineage)
		if len(got) != 1 || got[0].State != "running" {
			t.Fatalf("want %s running, got %+v", a, got)
		}
	}
	if r := mustRun(t, dir, "plan"); !strings.Contains(r.stdout, "No changes.") {
		t.Errorf("second plan: %s", r)
	}
	if r := bottlefile(t, dir, "exec", "agent.coder", "--", "sh", "-c", "echo from-$HOSTNAME-ok; exit 3"); r.code != 3 || !strings.HasPrefix(r.stdout, "from-") || !strings.HasSuffix(r.stdout, "-ok\n") {
		t.Errorf("exec: %s", r)
	}
	if r := mustRun(t, dir, "destroy", "-auto-approve"); !strings.Contains(r.stdout, "Destroy complete!") {
		t.Fatalf("destroy: %s", r)
	}
	if left := containersWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("containers left: %+v", left)
	}
	if left := networksWith(t, cli, drivers.LabelLineage+"="+lineage); len(left) != 0 {
		t.Errorf("networks left: %+v", left)
	}
}

// wantOneReachError: plan fails with exactly one error for the runtime,
// however many agents it holds, and the error has each of words.
func wantOneReachError(t *testing.T, dir string, words ...string) {
	t.Helper()
	r := bottlefile(t, dir, "plan")
	if r.code != 1 {
		t.Fatalf("plan: want exit 1, got %s", r)
	}
	if n := strings.Count(r.stderr, "Error: "); n != 1 || !strings.Contains(r.stderr, `Error: Cannot reach runtime "remote"`) {
		t.Errorf("want one error, Cannot reach runtime \"remote\"; got %d:\n%s", n, r.stderr)
	}
	flat := strings.Join(strings.Fields(r.stderr), " ")
	for _, w := range words {
		if !strings.Contains(flat, w) {
			t.Errorf("the error lacks %q:\n%s", w, r.stderr)
		}
	}
}

// TestE2ERemoteTLS: a runtime on tcp:// with TLS verified both ways (the
// local engine behind a TLS endpoint that requires a client certificate,
// certificates made by the test) plans, applies, execs and destroys; a
// CA that did not sign the engine's certificate, a client certificate it
// does not take, and a port where nothing listens are each one clear
// error.
func TestE2ERemoteTLS(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	te := enginetest.StartTLSEngine(t, enginetest.Socket)
	dir := t.TempDir()
	block := func(host, ca, cert, key string) string {
		return fmt.Sprintf("  host     = %q\n  tls_ca   = %q\n  tls_cert = %q\n  tls_key  = %q", host, ca, cert, key)
	}

	writeBottlefile(t, dir, remoteConfig, block(te.Host(), te.CA.File, te.Client.Cert, te.Client.Key), image)
	remoteLifecycle(t, dir)
	if te.Handled() == 0 {
		t.Error("no connection went through the TLS endpoint")
	}

	other := enginetest.NewCA(t, "other")
	writeBottlefile(t, dir, remoteConfig, block(te.Host(), other.File, te.Client.Cert, te.Client.Key), image)
	wantOneReachError(t, dir, `host = "`+te.Host()+`"`, "TLS: the engine's certificate at "+te.Addr+" is not signed by tls_ca ("+other.File+")")

	stranger := other.Issue(t, "stranger")
	writeBottlefile(t, dir, remoteConfig, block(te.Host(), te.CA.File, stranger.Cert, stranger.Key), image)
	wantOneReachError(t, dir, "TLS: the engine at "+te.Addr+" refused the client certificate tls_cert ("+stranger.Cert+")")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	writeBottlefile(t, dir, remoteConfig, block("tcp://"+closed, te.CA.File, te.Client.Cert, te.Client.Key), image)
	wantOneReachError(t, dir, "the connection to "+closed+" was refused")
}

// TestE2ERemoteSSH: a runtime on ssh:// (an sshd of the test's on
// loopback; ssh runs `docker system dial-stdio` there) plans, applies,
// execs and destroys; a key the host refuses is one authentication error.
func TestE2ERemoteSSH(t *testing.T) {
	parallel(t)
	cli := dockertest.Client(t)
	image := dockertest.BusyboxImage(t, cli)
	sshd := enginetest.StartSSHD(t)
	dir := t.TempDir()
	block := fmt.Sprintf("  host = %q", sshd.Host())
	writeBottlefile(t, dir, remoteConfig, block, image)

	setDirEnv(t, dir, "PATH="+sshd.ClientPath(t, enginetest.Client{}))
	remoteLifecycle(t, dir)
	if !strings.Contains(sshd.Log(), "Accepted publickey") {
		t.Errorf("the sshd accepted no login:\n%s", sshd.Log())
	}

	setDirEnv(t, dir, "PATH="+sshd.ClientPath(t, enginetest.Client{OtherKey: true}))
	wantOneReachError(t, dir, `host = "`+sshd.Host()+`"`, "ssh authentication to "+strings.TrimPrefix(sshd.Host(), "ssh://")+" failed", "Permission denied (publickey)")
}
