package state

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// holdLockEnv makes the test binary a child that holds a state's lock.
const holdLockEnv = "BOTTLEFILE_STATE_TEST_HOLD_LOCK"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdLockEnv); dir != "" {
		s, err := Open(dir, Options{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
		s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// seed makes a state with enough records to span several pages, then
// opens it for writing once more, so the backup holds the same records.
func seed(t *testing.T, dir string) []Record {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Init(); err != nil {
		t.Fatal(err)
	}
	pad, _ := json.Marshal(strings.Repeat("x", 200))
	for i := range 60 {
		r := Record{Addr: fmt.Sprintf("agent.a%02d", i), Kind: "container", ID: fmt.Sprintf("c%d", i), Hash: "h",
			Attrs: map[string]json.RawMessage{"pad": pad}}
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	return reopenForWrite(t, dir)
}

// reopenForWrite opens for writing (which keeps the backup) and returns the records.
func reopenForWrite(t *testing.T, dir string) []Record {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func overwrite(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	rand.Read(buf)
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size func(int64) int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size(fi.Size())); err != nil {
		t.Fatal(err)
	}
}

func pageSizeOf(t *testing.T, path string) int64 {
	t.Helper()
	m, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(m.pageSize)
}

// TestDamagedStates: every kind of damage is refused, for reading and for
// writing, with an error that says what is wrong and how to restore; never
// a panic, never a new state; and the backup brings back every record.
func TestDamagedStates(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string) []Record // returns the records to expect after a restore, if they changed
		is     error
		want   []string
		// warnOnly: reading works with a warning; writing is refused.
		warnOnly bool
	}{
		{name: "empty file", damage: func(t *testing.T, dir string) []Record {
			truncate(t, Path(dir), func(int64) int64 { return 0 })
			return nil
		}, is: ErrDamaged, want: []string{"empty (0 bytes)", "refused rather than taken as a new, empty state", "bottlefile state restore-backup", "60 records"}},
		{name: "truncated to half", damage: func(t *testing.T, dir string) []Record {
			truncate(t, Path(dir), func(n int64) int64 { return n / 2 })
			return nil
		}, is: ErrDamaged, want: []string{"truncated", "bottlefile state restore-backup"}},
		{name: "truncated mid-page", damage: func(t *testing.T, dir string) []Record {
			truncate(t, Path(dir), func(n int64) int64 { return n - 100 })
			return nil
		}, is: ErrDamaged, want: []string{"not a whole number of its", "bottlefile state restore-backup"}},
		{name: "random bytes over page 0", damage: func(t *testing.T, dir string) []Record {
			overwrite(t, Path(dir), 0, int(pageSizeOf(t, Path(dir))))
			return nil
		}, is: ErrDamaged, want: []string{"meta page 0 is damaged", "bottlefile state restore-backup"}},
		{name: "random bytes over the second meta page", damage: func(t *testing.T, dir string) []Record {
			ps := pageSizeOf(t, Path(dir))
			overwrite(t, Path(dir), ps, int(ps))
			return nil
		}, is: ErrDamaged, want: []string{"meta page 1 is damaged", "silently use the other one", "bottlefile state restore-backup"}},
		{name: "random bytes everywhere", damage: func(t *testing.T, dir string) []Record {
			fi, _ := os.Stat(Path(dir))
			overwrite(t, Path(dir), 0, int(fi.Size()))
			return nil
		}, is: ErrDamaged, want: []string{"not a bottlefile state", "bottlefile state restore-backup"}},
		{name: "random bytes over the freelist and root", damage: func(t *testing.T, dir string) []Record {
			ps := pageSizeOf(t, Path(dir))
			fi, _ := os.Stat(Path(dir))
			overwrite(t, Path(dir), 2*ps, int(fi.Size()-2*ps))
			return nil
		}, is: ErrDamaged, want: []string{"page", "overwritten", "bottlefile state restore-backup"}},
		{name: "random bytes over a page of records", damage: func(t *testing.T, dir string) []Record {
			overwrite(t, Path(dir), leafPage(t, Path(dir)), 4096)
			return nil
		}, is: ErrDamaged, want: []string{"bbolt", "bottlefile state restore-backup"}},
		{name: "file deleted", damage: func(t *testing.T, dir string) []Record {
			os.Remove(Path(dir))
			return nil
		}, is: ErrDamaged, want: []string{"does not exist, but its backup", "60 objects", "bottlefile state restore-backup"}},
		{name: "serial lower than backup", damage: func(t *testing.T, dir string) []Record {
			// An older copy of the file, then one more write, then the old
			// copy put back: what a meta-page fallback looks like.
			old, err := os.ReadFile(Path(dir))
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Put(Record{Addr: "agent.late", Kind: "container", ID: "late"}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			recs := reopenForWrite(t, dir)
			if err := os.WriteFile(Path(dir), old, 0o600); err != nil {
				t.Fatal(err)
			}
			return recs
		}, is: ErrRolledBack, want: []string{"went back in time", "older meta page", "bottlefile state restore-backup"}},
		{name: "copied from another directory", damage: func(t *testing.T, dir string) []Record {
			// dir's state is replaced by one copied from elsewhere.
			other := t.TempDir()
			seed(t, other)
			for _, name := range []string{File, File + BackupSuffix} {
				data, err := os.ReadFile(filepath.Join(other, Dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, Dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			return nil
		}, is: ErrMoved, warnOnly: true, want: []string{"records /", "as its directory, not " + "DIR", "bottlefile state relocate", "take them over"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			want := seed(t, dir)
			if got := tt.damage(t, dir); got != nil {
				want = got
			}
			check := func(err error) {
				t.Helper()
				if !errors.Is(err, tt.is) {
					t.Fatalf("want %v, got %v", tt.is, err)
				}
				for _, w := range tt.want {
					w = strings.ReplaceAll(w, "DIR", dir)
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error does not say %q:\n%v", w, err)
					}
				}
			}
			// Writing is refused, and nothing is written in its place.
			before, _ := os.ReadFile(Path(dir))
			_, err := Open(dir, Options{})
			check(err)
			after, _ := os.ReadFile(Path(dir))
			if string(before) != string(after) {
				t.Error("a refused open changed the state file")
			}
			// Reading is refused too, or, for a moved state, warns.
			s, err := Open(dir, Options{ReadOnly: true})
			if tt.warnOnly {
				if err != nil {
					t.Fatalf("reading a moved state: %v", err)
				}
				if len(s.Warnings()) != 1 || !strings.Contains(s.Warnings()[0], "state relocate") {
					t.Errorf("reading a moved state: warnings %q", s.Warnings())
				}
				s.Close()
				// Accepting the move is explicit, and then the state is this directory's.
				s, err = Open(dir, Options{AcceptMove: true})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Relocate(); err != nil {
					t.Fatal(err)
				}
				s.Close()
			} else {
				check(err)
				_, statErr := os.Stat(Path(dir))
				res, err := RestoreBackup(dir, 0)
				if err != nil {
					t.Fatal(err)
				}
				if res.Backup.Records != len(want) {
					t.Errorf("the restored backup has %d records, want %d", res.Backup.Records, len(want))
				}
				if statErr == nil && res.Kept == "" {
					t.Error("the replaced file was not kept")
				}
			}
			// Nothing is lost: the state reads back every record, and can be written.
			got := reopenForWrite(t, dir)
			if tt.warnOnly {
				return // the records are the other directory's, relocated
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("after restoring the backup: %d records, want %d", len(got), len(want))
			}
		})
	}
}

// TestFullDiskOnFirstApply: a state file cut short while bbolt created it
// (what a full disk left: 8 KiB) is refused with an error, for every
// command, and a new state is never created over it.
func TestFullDiskOnFirstApply(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(BackupPath(dir)); err == nil {
		t.Error("a state with no lineage was backed up")
	}
	truncate(t, Path(dir), func(int64) int64 { return 8192 })
	for _, opts := range []Options{{}, {ReadOnly: true}} {
		_, err := Open(dir, opts)
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "There is no backup") {
			t.Fatalf("%+v: want ErrDamaged with no backup to offer, got %v", opts, err)
		}
	}
	if fi, _ := os.Stat(Path(dir)); fi.Size() != 8192 {
		t.Errorf("the damaged file was changed: %d bytes", fi.Size())
	}
	if _, err := RestoreBackup(dir, 0); err == nil || !strings.Contains(err.Error(), "no backup") {
		t.Errorf("restoring without a backup: %v", err)
	}
	// Creating a state leaves nothing but the state behind.
	entries, _ := os.ReadDir(filepath.Join(dir, Dir))
	for _, e := range entries {
		if e.Name() != File {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestBackupBeforeWriting: opening for writing keeps the state as it was;
// reading never touches the backup; a backup is written whole.
func TestBackupBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	want := seed(t, dir)
	sum, err := ReadSummary(BackupPath(dir))
	if err != nil || sum.Records != len(want) {
		t.Fatalf("backup after seeding: %+v %v", sum, err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	serial := s.Serial()
	if err := s.Delete(want[0].Addr); err != nil {
		t.Fatal(err)
	}
	if s.WriteErr() != nil {
		t.Errorf("WriteErr after a good write: %v", s.WriteErr())
	}
	s.Close()
	sum, _ = ReadSummary(BackupPath(dir))
	if sum.Serial != serial || sum.Records != len(want) {
		t.Errorf("the backup is not the state before the write: %+v (serial before %d)", sum, serial)
	}
	fi, _ := os.Stat(BackupPath(dir))
	s, err = Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi2, _ := os.Stat(BackupPath(dir)); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Error("a read-only open rewrote the backup")
	}
	if _, err := os.Stat(BackupPath(dir) + ".tmp"); err == nil {
		t.Error("a temporary backup file was left")
	}
}

func TestRestoreBackupRefusedWhileLocked(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir)
	held, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = RestoreBackup(dir, 0)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("want ErrLocked naming this process, got %v", err)
	}
}

// TestLockErrorNamesTheHolder: another process's lock is named by pid,
// host, command and time; a lock information file whose process is gone
// is called stale; the file goes when the lock does.
func TestLockErrorNamesTheHolder(t *testing.T) {
	dir := t.TempDir()
	want := seed(t, dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), holdLockEnv+"="+dir)
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("child: %q", line)
	}
	host, _ := os.Hostname()
	for _, opts := range []Options{{}, {ReadOnly: true}, {LockTimeout: 200 * time.Millisecond}} {
		_, err := Open(dir, opts)
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("%+v: want ErrLocked, got %v", opts, err)
		}
		for _, w := range []string{fmt.Sprintf("pid %d on host %s", child.Process.Pid, host), "writing since", filepath.Base(exe), "-test.run"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("the lock error does not say %q:\n%v", w, err)
			}
		}
		if strings.Contains(err.Error(), "stale") {
			t.Errorf("a live holder called stale: %v", err)
		}
	}
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	if holders := LockHolders(Path(dir)); len(holders) != 0 {
		t.Errorf("lock information left after the holder closed: %+v", holders)
	}
	if got := reopenForWrite(t, dir); !reflect.DeepEqual(got, want) {
		t.Error("records changed")
	}

	// Stale information: the holder's file names a process that is gone.
	gone := exec.Command(exe, "-test.run=^$")
	gone.Run()
	held, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	info := LockInfo{PID: gone.Process.Pid, Host: host, Command: "bottlefile apply", Since: time.Now().Add(-time.Hour), Write: true}
	data, _ := json.Marshal(info)
	os.WriteFile(Path(dir)+".lock.info", data, 0o644)
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("Not holders: lock information left by processes that are gone (killed or crashed), removed by the next command that takes the lock:\n  pid %d on host", gone.Process.Pid)) {
		t.Fatalf("want the stale record set apart, got %v", err)
	}
	if strings.Contains(err.Error(), "Held by:") {
		t.Errorf("a gone process shown as the holder:\n%v", err)
	}
}

// TestWriteErrIsKept: a failed write is remembered, so an apply's summary
// can say the state does not record everything.
func TestWriteErrIsKept(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Init(); err != nil {
		t.Fatal(err)
	}
	fst := s.st.(*fileStorage)
	fst.db.Close() // what a write that cannot reach the disk looks like to the caller
	if err := s.Put(Record{Addr: "agent.a"}); err == nil {
		t.Fatal("a write to a closed database succeeded")
	}
	if err := s.WriteErr(); err == nil || !strings.Contains(err.Error(), "writing state") {
		t.Fatalf("WriteErr: %v", err)
	}
	os.Remove(fst.lockInfo)
}

// leafPage is the offset of a page of records that is not the root.
func leafPage(t *testing.T, path string) int64 {
	t.Helper()
	m, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	ps := int64(m.pageSize)
	le := binary.LittleEndian
	free := map[uint64]bool{}
	fl := data[int64(m.freelist)*ps:]
	n, ids := uint64(le.Uint16(fl[10:])), fl[pageHeaderSize:]
	if n == 0xFFFF {
		n, ids = le.Uint64(ids), ids[8:]
	}
	for i := range n {
		free[le.Uint64(ids[8*i:])] = true
	}
	for p := uint64(2); p < m.pgid; p++ {
		if !free[p] && p != m.root && p != m.freelist && data[int64(p)*ps+8]&leafPageFlag != 0 && data[int64(p)*ps+10] > 3 {
			return int64(p) * ps
		}
	}
	t.Fatal("no leaf page")
	return 0
}

// TestTruncatedTailIsHarmless: cutting only pages past the newest
// transaction's high-water mark loses nothing; the state opens, takes
// writes, and reads back.
func TestTruncatedTailIsHarmless(t *testing.T) {
	dir := t.TempDir()
	want := seed(t, dir)
	m, err := validateFile(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(Path(dir), int64(m.pgid)*int64(m.pageSize)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := s.Put(Record{Addr: fmt.Sprintf("agent.z%03d", i), Kind: "container"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if err := s.Delete(fmt.Sprintf("agent.z%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if got := reopenForWrite(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("records changed: %d, want %d", len(got), len(want))
	}
}
