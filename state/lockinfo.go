package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// command can name the holder. The file is private (0600) and names the
// command with its -var values hidden (redactArgs): other users and CI
// logs read it.
type LockInfo struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	Write   bool      `json:"write"`
	// StartTicks and BootID tell the holder from a later process given
	// the same pid (Linux: /proc/PID/stat's start time, in clock ticks
	// since boot, and the kernel's boot id); zero and "" where unknown.
	StartTicks uint64 `json:"start_ticks,omitempty"`
	BootID     string `json:"boot_id,omitempty"`
	// Redacted: Command has its values hidden already. A record written
	// by an older bottlefile has not; its command is redacted on reading.
	Redacted bool `json:"redacted,omitempty"`
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
// only the message naming the holder is poorer). It is called holding the
// lock, so it also removes what earlier holders left behind: for a writer
// every other file (an exclusive holder is the only one); for a reader the
// writer's file (no writer holds the lock while a reader does) and the
// files of readers that are gone.
func writeLockInfo(path string, write bool) string {
	host, _ := os.Hostname()
	for _, p := range lockInfoGlob(path) {
		switch {
		case write, p == lockInfoPath(path, true):
			os.Remove(p)
		default:
			if info, ok := readLockInfo(p, host); ok && info.Stale {
				os.Remove(p)
			}
		}
	}
	info := LockInfo{PID: os.Getpid(), Host: host, Command: commandLine(), Since: time.Now().UTC().Truncate(time.Second), Write: write, Redacted: true}
	info.StartTicks, info.BootID = processStart(info.PID)
	data, _ := json.Marshal(info)
	p := lockInfoPath(path, write)
	err := writeFileAtomic(p, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
	if err != nil {
		return ""
	}
	return p
}

func commandLine() string {
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	return strings.Join(redactArgs(args), " ")
}

// hiddenValue stands for what redactArgs leaves out.
const hiddenValue = "(value hidden)"

// redactArgs is a command line as the lock record may name it: the value
// of every -var (sensitive or not: the record cannot tell, and a refused
// command prints it where CI logs keep it) and everything after "--" (the
// command exec runs in a workload) are hidden; variable names, -var-file
// paths and other flags stay, so the holder can still be recognised.
// BOTTLEFILE_VAR_ values are in the environment, never in the arguments.
func redactArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if rest := len(args) - i - 1; rest > 0 {
				out = append(out, "--", fmt.Sprintf("(%d %s hidden)", rest, pluralWord(rest, "argument", "arguments")))
			} else {
				out = append(out, "--")
			}
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "var" {
			out = append(out, a)
			continue
		}
		flag := strings.TrimSuffix(a, "="+value)
		if !hasValue {
			// -var NAME=VALUE: the value is the next argument.
			out = append(out, a)
			if i+1 < len(args) {
				i++
				out = append(out, hideVarValue(args[i]))
			}
			continue
		}
		out = append(out, flag+"="+hideVarValue(value))
	}
	return out
}

// redactUnredacted hides the values in a command line an older
// bottlefile recorded as typed. Its arguments were joined with spaces, so
// where a value held spaces the split cannot be undone: from the first
// -var on, everything is hidden but the flags' names.
func redactUnredacted(cmd string) string {
	fields := strings.Fields(cmd)
	for i, f := range fields {
		if name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "="); strings.HasPrefix(f, "-") && name == "var" {
			return strings.Join(append(redactArgs(fields[:i]), "-var", "(values hidden)"), " ")
		}
	}
	return strings.Join(redactArgs(fields), " ")
}

// hideVarValue turns NAME=VALUE into NAME=(value hidden); an argument
// without "=" (a mistake) is hidden whole.
func hideVarValue(arg string) string {
	name, _, ok := strings.Cut(arg, "=")
	if !ok {
		return hiddenValue
	}
	return name + "=" + hiddenValue
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// readLockInfo reads one lock information file, judging whether its
// process is gone from this host.
func readLockInfo(p, host string) (LockInfo, bool) {
	var info LockInfo
	data, err := os.ReadFile(p)
	if err != nil || json.Unmarshal(data, &info) != nil {
		return info, false
	}
	info.Stale = info.Host == host && processGone(info.PID, info.StartTicks, info.BootID)
	if !info.Redacted {
		// Split at spaces as it was joined: a value holding spaces loses
		// only its first word to the hidden mark, so the whole rest of
		// the line after a -var is hidden too.
		info.Command, info.Redacted = redactUnredacted(info.Command), true
	}
	return info, true
}

// LockHolders reads the lock information left next to a state file.
func LockHolders(path string) []LockInfo {
	host, _ := os.Hostname()
	var out []LockInfo
	for _, p := range lockInfoGlob(path) {
		if info, ok := readLockInfo(p, host); ok {
			out = append(out, info)
		}
	}
	return out
}

// describeHolders is the part of the lock error that names the holders.
// Information left by processes that are gone is set apart, never shown
// as a holder: it is what a killed command left behind, and the next
// command that takes the lock removes it.
func describeHolders(path string) string { return describeLockInfos(LockHolders(path)) }

// describeLockInfos names the holders a lock's records give, setting
// apart those whose process is gone.
func describeLockInfos(holders []LockInfo) string {
	var live, stale strings.Builder
	nLive, nStale := 0, 0
	for _, h := range holders {
		kind := "reading"
		if h.Write {
			kind = "writing"
		}
		if h.Stale {
			nStale++
			fmt.Fprintf(&stale, "\n  pid %d on host %s, %s from %s: %s", h.PID, h.Host, kind,
				h.Since.Local().Format("2006-01-02 15:04:05 MST"), h.Command)
			continue
		}
		nLive++
		fmt.Fprintf(&live, "\n  pid %d on host %s, %s since %s (%s ago): %s", h.PID, h.Host, kind,
			h.Since.Local().Format("2006-01-02 15:04:05 MST"), time.Since(h.Since).Round(time.Second), h.Command)
	}
	var b strings.Builder
	if nLive > 0 {
		b.WriteString("Held by:" + live.String())
	} else {
		b.WriteString("The holder left no lock information (an older bottlefile, or a process that has only just taken the lock).")
	}
	if nStale > 0 {
		b.WriteString("\nNot holders: lock information left by processes that are gone (killed or crashed), removed by the next command that takes the lock:" + stale.String())
	}
	return b.String()
}
