//go:build linux

package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadBinarySumCache (issue 28): a binary's sum is hashed once per
// version of the file and then read from the cache; a file written again
// in place, even to the same size with its modification time set back,
// is hashed anew, as is a new file at the path.
func TestReadBinarySumCache(t *testing.T) {
	cache := t.TempDir()
	old, oldSettled := sumCacheDir, sumSettled
	sumCacheDir = func() (string, error) { return cache, nil }
	// A file written by the test is not settled for the default: its
	// sums are kept once it is 30 ms old.
	sumSettled = 30 * time.Millisecond
	t.Cleanup(func() { sumCacheDir, sumSettled = old, oldSettled })
	settle := func() { time.Sleep(2 * sumSettled) } // past the settling, and a clock tick

	bin := filepath.Join(t.TempDir(), "bottlefile")
	write := func(content string) string {
		t.Helper()
		if err := os.WriteFile(bin, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256([]byte(content))
		return hex.EncodeToString(h[:])
	}
	read := func() string {
		t.Helper()
		b, err := ReadBinary(bin)
		if err != nil {
			t.Fatal(err)
		}
		return b.Sum
	}
	want := write("version one")
	if got := read(); got != want {
		t.Fatalf("first read: sum %s, want %s", got, want)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Fatalf("%d cache entries for a file just written, want none: a write within the clock tick would keep its times", len(entries))
	}
	settle()
	if got := read(); got != want {
		t.Fatalf("read once settled: sum %s, want %s", got, want)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Fatalf("%d cache entries after the first read, want 1", len(entries))
	}
	// The cache is what the next read answers from: a forged entry for the
	// same key shows through.
	entry := filepath.Join(cache, entries[0].Name())
	data, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ := strings.Cut(string(data), "\n")
	forged := strings.Repeat("ab", sha256.Size)
	if err := os.WriteFile(entry, []byte(key+"\n"+forged+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != forged {
		t.Fatalf("second read: sum %s, want the cached %s", got, forged)
	}
	// Written in place, same size, modification time set back: the
	// change time moved, so it is hashed again.
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	want = write("version two")
	if err := os.Chtimes(bin, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := read(); got != want {
		t.Errorf("after a write in place: sum %s, want %s", got, want)
	}
	// A new file renamed over the path: another inode.
	next := bin + ".new"
	if err := os.WriteFile(next, []byte("version three"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, bin); err != nil {
		t.Fatal(err)
	}
	settle()
	h := sha256.Sum256([]byte("version three"))
	if got := read(); got != hex.EncodeToString(h[:]) {
		t.Errorf("after a rename over it: sum %s, want %s", got, hex.EncodeToString(h[:]))
	}
	// A cache that cannot be written costs only the hash.
	sumCacheDir = func() (string, error) { return filepath.Join(bin, "not-a-dir"), nil }
	if got := read(); got != hex.EncodeToString(h[:]) {
		t.Errorf("with an unwritable cache: sum %s", got)
	}
}
