// Package pgtest starts a PostgreSQL server of a test's own: a cluster
// made by initdb in a temporary directory, listening only on a unix
// socket there, stopped by its pid when the test ends. Tests of the pg
// state backend use it; without PostgreSQL installed they skip, unless
// BOTTLEFILE_REQUIRE_POSTGRES=1 (CI) makes them fail.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running test cluster.
type Server struct {
	// Dir holds the cluster's data and its socket.
	Dir string
	// ConnStr reaches the postgres database as the superuser postgres.
	ConnStr string
	// PID is the postmaster's.
	PID int
}

// binDir finds the directory of initdb and postgres: Debian's
// /usr/lib/postgresql/VERSION/bin (the newest), or the PATH.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[0])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Available says why no server can be started here, or "".
func Available() string {
	if binDir() == "" {
		return "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, no initdb on the PATH): install Debian's postgresql package to run the pg state backend's tests"
	}
	return ""
}

// Start starts a cluster for t and stops it when t ends. It skips t
// when PostgreSQL is not installed, or fails it when
// BOTTLEFILE_REQUIRE_POSTGRES=1.
func Start(t testing.TB) *Server {
	t.Helper()
	if why := Available(); why != "" {
		if os.Getenv("BOTTLEFILE_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("BOTTLEFILE_REQUIRE_POSTGRES=1: %s", why)
		}
		t.Skip(why)
	}
	bin := binDir()
	// A short path: a unix socket's path is at most 107 bytes.
	dir, err := os.MkdirTemp("", "bfpg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// PostgreSQL refuses to run as root: run it as the postgres user (or
	// nobody) then, owning the directory.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = serverUser(t)
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.Env = []string{"PATH=/usr/bin:/bin", "LANG=C"}
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-p", "5432",
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "unix_socket_permissions=0777", "-c", "max_connections=50")
	srv.Dir = dir
	srv.Env = initdb.Env
	srv.Stdout, srv.Stderr = logf, logf
	// Pdeathsig stops the server should the test binary die first.
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	s := &Server{Dir: dir, PID: srv.Process.Pid,
		ConnStr: fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)}
	t.Cleanup(func() {
		// SIGINT is PostgreSQL's fast shutdown.
		syscall.Kill(s.PID, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(s.PID, syscall.SIGKILL)
			<-done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.ConnStr)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return s
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("postgres exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("postgres did not accept connections within 60s: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serverUser is who runs the server when the test runs as root.
func serverUser(t testing.TB) *syscall.Credential {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	t.Fatal("running as root, and there is no postgres or nobody user to run PostgreSQL as (it refuses root)")
	return nil
}
