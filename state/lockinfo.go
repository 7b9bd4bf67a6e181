package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// errLockBusy is preLock's timeout; Open turns it into ErrLocked.
var errLockBusy = errors.New("lock busy")

// LockInfo says who holds the state lock. Each holder writes one file next
// to the database (the writer state.db.lock.info, each reader its own
// state.db.lock.PID-N.info) and removes it on Close, so that a refused
// command can name the holder.
type LockInfo struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	Write   bool      `json:"write"`
	// Stale is set when reading: the process is gone from this host.
	Stale bool `json:"-"`
}

var readerSeq atomic.Uint64

func lockInfoPath(path string, write bool) string {
	if write {
		return path + ".lock.info"
	}
	return fmt.Sprintf("%s.lock.%d-%d.info", path, os.Getpid(), readerSeq.Add(1))
}

func lockInfoGlob(path string) []string {
	matches, _ := filepath.Glob(path + ".lock.*info")
	sort.Strings(matches)
	return matches
}

// writeLockInfo records this process as a holder and returns the file to
// remove on Close ("" when it could not be written: the lock still holds,
// only the message naming the holder is poorer).
func writeLockInfo(path string, write bool) string {
	if write {
		// An exclusive holder is the only holder: any other file is stale.
		for _, p := range lockInfoGlob(path) {
			os.Remove(p)
		}
	}
	host, _ := os.Hostname()
	info := LockInfo{PID: os.Getpid(), Host: host, Command: commandLine(), Since: time.Now().UTC().Truncate(time.Second), Write: write}
	data, _ := json.Marshal(info)
	p := lockInfoPath(path, write)
	tmp := p + ".tmp"
	if os.WriteFile(tmp, append(data, '\n'), 0o644) != nil || os.Rename(tmp, p) != nil {
		os.Remove(tmp)
		return ""
	}
	return p
}

func commandLine() string {
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	return strings.Join(args, " ")
}

// LockHolders reads the lock information left next to a state file.
func LockHolders(path string) []LockInfo {
	host, _ := os.Hostname()
	var out []LockInfo
	for _, p := range lockInfoGlob(path) {
		if strings.HasSuffix(p, ".tmp") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var info LockInfo
		if json.Unmarshal(data, &info) != nil {
			continue
		}
		info.Stale = info.Host == host && processGone(info.PID)
		out = append(out, info)
	}
	return out
}

// describeHolders is the part of the lock error that names the holders.
func describeHolders(path string) string {
	holders := LockHolders(path)
	if len(holders) == 0 {
		return "The holder left no lock information (an older bottlefile, or a process that has only just taken the lock)."
	}
	var b strings.Builder
	live := 0
	for _, h := range holders {
		kind := "reading"
		if h.Write {
			kind = "writing"
		}
		fmt.Fprintf(&b, "\n  pid %d on host %s, %s since %s (%s ago): %s", h.PID, h.Host, kind,
			h.Since.Local().Format("2006-01-02 15:04:05 MST"), time.Since(h.Since).Round(time.Second), h.Command)
		if h.Stale {
			fmt.Fprintf(&b, "\n    (stale: process %d is gone; its lock information was left behind by a crash)", h.PID)
		} else {
			live++
		}
	}
	head := "Held by:"
	if live == 0 {
		head = "The lock information names only processes that are gone, so the holder left none of its own:"
	}
	return head + b.String()
}
