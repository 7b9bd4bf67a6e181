package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk layout, as far as checking a file before bbolt maps it
// needs: bbolt trusts its meta pages and maps whatever they point at, so a
// truncated or overwritten file panics (invalid freelist page) or faults
// (SIGBUS past the end of the file) instead of returning an error.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	noFreelist       = ^uint64(0)
)

// boltMeta is one of bbolt's two meta pages: each commit writes the next
// transaction id to page txid%2, so the newer of the two valid ones is the
// database's current state and the other the one before it.
type boltMeta struct {
	page     int
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use
	txid     uint64
	err      error // why the page is not a valid meta page
}

// parseMeta reads a meta page from buf, which starts at the page.
func parseMeta(buf []byte, page int) boltMeta {
	m := boltMeta{page: page}
	if len(buf) < pageHeaderSize+64 {
		m.err = errors.New("it is cut short")
		return m
	}
	le := binary.LittleEndian
	b := buf[pageHeaderSize:]
	magic, version := le.Uint32(b[0:]), le.Uint32(b[4:])
	m.pageSize = le.Uint32(b[8:])
	m.root = le.Uint64(b[16:])
	m.freelist = le.Uint64(b[32:])
	m.pgid = le.Uint64(b[40:])
	m.txid = le.Uint64(b[48:])
	sum := le.Uint64(b[56:])
	h := fnv.New64a()
	h.Write(b[:56])
	switch {
	case magic != boltMagic:
		m.err = errors.New("it has no bbolt marker")
	case version != boltVersion:
		m.err = fmt.Errorf("it has bbolt format version %d, not %d", version, boltVersion)
	case sum != h.Sum64():
		m.err = errors.New("its checksum does not match")
	case le.Uint16(buf[8:])&metaPageFlag == 0:
		m.err = errors.New("it is not marked as a meta page")
	case m.pageSize < 512 || m.pageSize&(m.pageSize-1) != 0:
		m.err = fmt.Errorf("it names an impossible page size %d", m.pageSize)
	}
	return m
}

// fileProblem says why a state file cannot be opened safely; Foreign
// means it is not a bbolt database at all (not merely damaged).
type fileProblem struct {
	Detail  string
	Foreign bool
	Empty   bool
}

func (p *fileProblem) Error() string { return p.Detail }

// validateFile checks a state file the way bbolt will read it, without
// mapping it: a size that is a whole number of pages, two meta pages whose
// checksums match, and the pages the newest one points at inside the file.
// It returns nil for a file bbolt can open without panicking or faulting.
func validateFile(path string) (*boltMeta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return validateReader(f, fi.Size())
}

func validateReader(f io.ReaderAt, size int64) (*boltMeta, error) {
	if size == 0 {
		return nil, &fileProblem{Empty: true, Detail: "the file is empty (0 bytes): it was truncated, or a write that created it never finished"}
	}
	read := func(off int64, n int) []byte {
		buf := make([]byte, n)
		k, _ := f.ReadAt(buf, off)
		return buf[:k]
	}
	m0 := parseMeta(read(0, 4096), 0)
	pageSize := int64(m0.pageSize)
	if m0.err != nil {
		// Like bbolt: find the second meta page at each possible page size.
		pageSize = 0
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			if m := parseMeta(read(pos, 4096), 1); m.err == nil && int64(m.pageSize) == pos {
				pageSize = pos
				break
			}
		}
		if pageSize == 0 {
			return nil, &fileProblem{Foreign: true, Detail: fmt.Sprintf("neither of bbolt's two meta pages is valid (page 0: %v): it is some other file, or its start was overwritten", m0.err)}
		}
	}
	if size%pageSize != 0 || size < 4*pageSize {
		return nil, &fileProblem{Detail: fmt.Sprintf("it is %d bytes, which is not a whole number of its %d-byte pages or fewer than 4 of them: it was truncated, or a write ran out of disk space", size, pageSize)}
	}
	m1 := parseMeta(read(pageSize, 4096), 1)
	for _, m := range []boltMeta{m0, m1} {
		if m.err != nil {
			return nil, &fileProblem{Detail: fmt.Sprintf("meta page %d is damaged (%v); bbolt would silently use the other one, which may be the transaction before, and so lose the newest write", m.page, m.err)}
		}
		if int64(m.pageSize) != pageSize {
			return nil, &fileProblem{Detail: fmt.Sprintf("meta page %d names page size %d, the other %d", m.page, m.pageSize, pageSize)}
		}
	}
	newest := m0
	if m1.txid > m0.txid {
		newest = m1
	}
	pages := uint64(size / pageSize)
	if newest.pgid > pages {
		return nil, &fileProblem{Detail: fmt.Sprintf("it is %d bytes, but its newest transaction uses %d pages of %d bytes (%d bytes): it was truncated, or a write ran out of disk space", size, newest.pgid, pageSize, newest.pgid*uint64(pageSize))}
	}
	if newest.root < 2 || newest.root >= newest.pgid {
		return nil, &fileProblem{Detail: fmt.Sprintf("its root page %d is outside the database's %d pages", newest.root, newest.pgid)}
	}
	if hdr := read(int64(newest.root)*pageSize, pageHeaderSize); len(hdr) < pageHeaderSize || binary.LittleEndian.Uint16(hdr[8:])&(branchPageFlag|leafPageFlag) == 0 {
		return nil, &fileProblem{Detail: fmt.Sprintf("its root page %d is not a tree page: it was overwritten", newest.root)}
	}
	if newest.freelist != noFreelist {
		if newest.freelist < 2 || newest.freelist >= newest.pgid {
			return nil, &fileProblem{Detail: fmt.Sprintf("its freelist page %d is outside the database's %d pages", newest.freelist, newest.pgid)}
		}
		hdr := read(int64(newest.freelist)*pageSize, pageHeaderSize)
		if len(hdr) < pageHeaderSize || binary.LittleEndian.Uint16(hdr[8:])&freelistPageFlag == 0 {
			return nil, &fileProblem{Detail: fmt.Sprintf("its freelist page %d is not a freelist page: it was overwritten", newest.freelist)}
		}
		if end := newest.freelist + 1 + uint64(binary.LittleEndian.Uint32(hdr[12:])); end > newest.pgid {
			return nil, &fileProblem{Detail: fmt.Sprintf("its freelist runs past the database's %d pages: it was overwritten", newest.pgid)}
		}
	}
	return &newest, nil
}
