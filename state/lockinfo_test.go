package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRedactArgs: the lock record names the command with every -var value
// hidden, in each form the flag package takes, and exec's command hidden.
func TestRedactArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no vars", []string{"bottlefile", "plan", "-lock-timeout=5s"}, "bottlefile plan -lock-timeout=5s"},
		{"separate", []string{"bottlefile", "apply", "-var", "api_key=s3cret"}, "bottlefile apply -var api_key=(value hidden)"},
		{"separate double dash", []string{"bottlefile", "apply", "--var", "api_key=s3cret"}, "bottlefile apply --var api_key=(value hidden)"},
		{"joined", []string{"bottlefile", "apply", "-var=api_key=s3cret"}, "bottlefile apply -var=api_key=(value hidden)"},
		{"joined double dash", []string{"bottlefile", "apply", "--var=api_key=s3cret"}, "bottlefile apply --var=api_key=(value hidden)"},
		{"value with equals", []string{"bottlefile", "apply", "-var", "k=a=b=s3cret"}, "bottlefile apply -var k=(value hidden)"},
		{"empty value", []string{"bottlefile", "apply", "-var=k="}, "bottlefile apply -var=k=(value hidden)"},
		{"no name", []string{"bottlefile", "apply", "-var", "s3cret"}, "bottlefile apply -var (value hidden)"},
		{"joined no name", []string{"bottlefile", "apply", "-var=s3cret"}, "bottlefile apply -var=(value hidden)"},
		{"value looks like a flag", []string{"bottlefile", "apply", "-var", "-s3cret"}, "bottlefile apply -var (value hidden)"},
		{"var last", []string{"bottlefile", "apply", "-var"}, "bottlefile apply -var"},
		{"var-file kept", []string{"bottlefile", "apply", "-var-file=prod.vars", "-var", "a=s3cret", "-var=b=s3cret", "-auto-approve"},
			"bottlefile apply -var-file=prod.vars -var a=(value hidden) -var=b=(value hidden) -auto-approve"},
		{"exec command", []string{"bottlefile", "exec", "agent.a", "--", "curl", "-H", "Authorization: s3cret"}, "bottlefile exec agent.a -- (3 arguments hidden)"},
		{"exec one argument", []string{"bottlefile", "exec", "agent.a", "--", "s3cret"}, "bottlefile exec agent.a -- (1 argument hidden)"},
		{"chdir global", []string{"bottlefile", "-chdir=/w", "plan", "-var", "x=s3cret"}, "bottlefile -chdir=/w plan -var x=(value hidden)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(redactArgs(tt.args), " ")
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Errorf("the value is left in %q", got)
			}
		})
	}
}

// TestOlderRecordRedactedOnReading: a record an older bottlefile wrote
// with the command as typed is shown without its values.
func TestOlderRecordRedactedOnReading(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir)
	host, _ := os.Hostname()
	writeRecord(t, Path(dir)+".lock.info", LockInfo{PID: os.Getpid(), Host: host, Command: "bottlefile apply -auto-approve -var api_key=s3cret two -var-file=x", Since: time.Now(), Write: true})
	holders := LockHolders(Path(dir))
	if len(holders) != 1 || holders[0].Command != "bottlefile apply -auto-approve -var (values hidden)" {
		t.Errorf("got %+v", holders)
	}
	writeRecord(t, Path(dir)+".lock.info", LockInfo{PID: os.Getpid(), Host: host, Command: "bottlefile exec agent.a -- curl s3cret", Since: time.Now(), Write: true})
	if holders := LockHolders(Path(dir)); len(holders) != 1 || strings.Contains(holders[0].Command, "s3cret") {
		t.Errorf("got %+v", holders)
	}
	// A record this bottlefile wrote is shown as written.
	writeRecord(t, Path(dir)+".lock.info", LockInfo{PID: os.Getpid(), Host: host, Command: "bottlefile apply -var k=(value hidden) -- (2 arguments hidden)", Since: time.Now(), Write: true, Redacted: true})
	if holders := LockHolders(Path(dir)); len(holders) != 1 || holders[0].Command != "bottlefile apply -var k=(value hidden) -- (2 arguments hidden)" {
		t.Errorf("got %+v", holders)
	}
}

// goneProcess is the pid of a process that has ended.
func goneProcess(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe, "-test.run=^$")
	c.Run()
	return c.Process.Pid
}

func writeRecord(t *testing.T, path string, info LockInfo) {
	t.Helper()
	data, _ := json.Marshal(info)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStaleLockRecordsReplaced: records left by a killed writer, by a
// killed reader, and by a process whose pid a later process was given
// (same pid, another start time) are recognised as gone; the next command
// to take the lock, reading or writing, removes them; and a refused
// command never shows them as holders.
func TestStaleLockRecordsReplaced(t *testing.T) {
	host, _ := os.Hostname()
	self, boot := processStart(os.Getpid())
	if self == 0 {
		t.Log("no /proc start time here: the pid-reuse case is not covered")
	}
	for _, readOnly := range []bool{true, false} {
		t.Run(fmt.Sprintf("read-only=%v", readOnly), func(t *testing.T) {
			dir := t.TempDir()
			seed(t, dir)
			path := Path(dir)
			dead := goneProcess(t)
			since := time.Now().Add(-time.Hour)
			writeRecord(t, path+".lock.info", LockInfo{PID: dead, Host: host, Command: "bottlefile apply -var k=(value hidden)", Since: since, Write: true})
			deadReader := fmt.Sprintf("%s.lock.%d-1.info", path, dead)
			writeRecord(t, deadReader, LockInfo{PID: dead, Host: host, Command: "bottlefile plan", Since: since})
			reused := fmt.Sprintf("%s.lock.%d-99.info", path, os.Getpid())
			if self != 0 {
				writeRecord(t, reused, LockInfo{PID: os.Getpid(), Host: host, Command: "bottlefile plan", Since: since, StartTicks: self + 1, BootID: boot})
			}
			for _, h := range LockHolders(path) {
				if !h.Stale {
					t.Errorf("not recognised as gone: %+v", h)
				}
			}

			s, err := Open(dir, Options{ReadOnly: readOnly})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			holders := LockHolders(path)
			if len(holders) != 1 || holders[0].PID != os.Getpid() || holders[0].Stale || holders[0].Write == readOnly {
				t.Fatalf("after open, want only this process's record, got %+v", holders)
			}
			if holders[0].StartTicks != self || holders[0].BootID != boot {
				t.Errorf("the record does not say when this process started: %+v, want %d %s", holders[0], self, boot)
			}
			for _, p := range []string{deadReader, reused} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was not removed", filepath.Base(p))
				}
			}
		})
	}

	// A refused command: the holder is live, a gone reader's record is
	// beside it (a reader cannot remove a live reader's record).
	dir := t.TempDir()
	seed(t, dir)
	path := Path(dir)
	held, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dead := goneProcess(t)
	writeRecord(t, fmt.Sprintf("%s.lock.%d-1.info", path, dead), LockInfo{PID: dead, Host: host, Command: "bottlefile plan -var k=(value hidden)", Since: time.Now(), Write: false})
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("want ErrLocked, got %v", err)
	}
	msg := err.Error()
	heldBy, notHolders, ok := strings.Cut(msg, "Not holders:")
	if !ok || !strings.Contains(heldBy, fmt.Sprintf("Held by:\n  pid %d on host", os.Getpid())) {
		t.Fatalf("want the live holder, then the gone process apart:\n%s", msg)
	}
	if strings.Contains(heldBy, fmt.Sprintf("pid %d", dead)) || !strings.Contains(notHolders, fmt.Sprintf("pid %d", dead)) {
		t.Errorf("the gone process is shown as a holder:\n%s", msg)
	}
}

// TestStatStartTicks: field 22, counted past a command name that holds
// spaces and parentheses.
func TestStatStartTicks(t *testing.T) {
	line := "4242 (a) (b c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	if got := statStartTicks(line); got != 987654 {
		t.Errorf("got %d", got)
	}
	if got := statStartTicks("garbage"); got != 0 {
		t.Errorf("garbage: got %d", got)
	}
}

// TestStateIsPrivate: a new state directory and everything Open writes
// in it are the user's alone (0700, 0600); an existing directory with
// wider modes (an older bottlefile, a copy) is narrowed when opened for
// writing, without following links out of it.
func TestStateIsPrivate(t *testing.T) {
	check := func(t *testing.T, dir string) {
		t.Helper()
		filepath.WalkDir(filepath.Join(dir, Dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			info, _ := d.Info()
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			}
			if info.Mode().Perm() != want {
				t.Errorf("%s: mode %v, want %v", p, info.Mode().Perm(), want)
			}
			return nil
		})
	}
	t.Run("fresh", func(t *testing.T) {
		dir := t.TempDir()
		seed(t, dir) // creates, writes, and opens again: the backup
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Open(dir, Options{ReadOnly: true})
		if err == nil {
			t.Fatal("a reader beside the writer")
		}
		_ = r
		var names []string
		entries, _ := os.ReadDir(filepath.Join(dir, Dir))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		for _, want := range []string{File, File + BackupSuffix, File + ".lock.info"} {
			if !slices.Contains(names, want) {
				t.Errorf("%s missing: %v", want, names)
			}
		}
		check(t, dir)
		s.Close()
		r, err = Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		check(t, dir) // the reader's record
		r.Close()
	})
	t.Run("widened", func(t *testing.T) {
		dir := t.TempDir()
		seed(t, dir)
		sd := filepath.Join(dir, Dir)
		outside := filepath.Join(dir, "outside")
		os.WriteFile(outside, nil, 0o644)
		os.MkdirAll(filepath.Join(sd, "logs", "agent.a"), 0o755)
		os.WriteFile(filepath.Join(sd, "logs", "agent.a", "x.log"), []byte("log"), 0o644)
		os.Symlink(outside, filepath.Join(sd, "link"))
		for _, p := range []string{sd, filepath.Join(sd, "logs"), filepath.Join(sd, "logs", "agent.a")} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{Path(dir), BackupPath(dir), filepath.Join(sd, "logs", "agent.a", "x.log")} {
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// Reading changes nothing.
		r, err := Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		if info, _ := os.Stat(Path(dir)); info.Mode().Perm() != 0o644 {
			t.Errorf("a read-only open changed the state's mode to %v", info.Mode().Perm())
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check(t, dir)
		if info, _ := os.Stat(outside); info.Mode().Perm() != 0o644 {
			t.Errorf("a link was followed out of the state directory: %v", info.Mode().Perm())
		}
	})
}
