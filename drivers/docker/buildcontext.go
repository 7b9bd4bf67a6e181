package docker

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// buildContext is a build block resolved against the file system.
type buildContext struct {
	dir        string // absolute, symlinks resolved
	dockerfile string // slash path relative to dir
	// buildOf, when set, is written into the Dockerfile sent as a LABEL
	// labelBuildOf after each FROM (the hash is of the file as it is).
	buildOf string
}

// resolveBuildContext checks a build context directory and its Dockerfile.
// It only reads.
func resolveBuildContext(dir, dockerfile string) (buildContext, error) {
	if dir == "" {
		return buildContext{}, errors.New("build context is empty")
	}
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	df := filepath.Clean(filepath.FromSlash(dockerfile))
	if !filepath.IsLocal(df) {
		return buildContext{}, fmt.Errorf("dockerfile %q must be a path inside the build context", dockerfile)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return buildContext{}, fmt.Errorf("build context: %w", err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return buildContext{}, fmt.Errorf("build context: %w", err)
	}
	if !st.IsDir() {
		return buildContext{}, fmt.Errorf("build context %s is not a directory", dir)
	}
	dst, err := os.Lstat(filepath.Join(real, df))
	if err != nil {
		return buildContext{}, fmt.Errorf("dockerfile: %w", err)
	}
	if !dst.Mode().IsRegular() {
		return buildContext{}, fmt.Errorf("dockerfile %s is not a regular file", filepath.Join(dir, df))
	}
	return buildContext{dir: real, dockerfile: filepath.ToSlash(df)}, nil
}

// hashContext returns the hash of everything a build would send.
func hashContext(bc buildContext) (string, error) {
	return walkContext(bc, nil)
}

// tarContext writes the context as a tar stream to w and returns its hash,
// computed over exactly the files written.
func tarContext(bc buildContext, w io.Writer) (string, error) {
	tw := tar.NewWriter(w)
	sum, err := walkContext(bc, tw)
	if err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return sum, nil
}

// walkContext visits the files of a build context in lexical order, skips
// what .dockerignore excludes (except the Dockerfile and .dockerignore,
// which the builder needs, as the docker CLI does), hashes each entry's
// slash path, type, permission bits and content (or link target), and,
// when tw is set, writes the entry to it. Modification times and owners are
// not hashed: touching a file does not change the plan. Sockets, devices and
// pipes are skipped.
func walkContext(bc buildContext, tw *tar.Writer) (string, error) {
	pm, err := readDockerignore(bc.dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	err = filepath.WalkDir(bc.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == bc.dir {
			return nil
		}
		rel, err := filepath.Rel(bc.dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if pm != nil && rel != bc.dockerfile && rel != ".dockerignore" {
			skip, err := pm.MatchesOrParentMatches(rel)
			if err != nil {
				return fmt.Errorf(".dockerignore: %w", err)
			}
			if skip {
				// Without "!" patterns nothing below can come back.
				if d.IsDir() && !pm.Exclusions() && !strings.HasPrefix(bc.dockerfile, rel+"/") {
					return fs.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		perm := mode & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		hdr := &tar.Header{
			Name:    rel,
			Mode:    int64(tarMode(perm)),
			ModTime: info.ModTime().Truncate(time.Second),
			Format:  tar.FormatPAX,
		}
		var typ byte
		switch {
		case mode.IsDir():
			typ = 'd'
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case mode.IsRegular():
			typ = 'f'
			hdr.Typeflag = tar.TypeReg
			hdr.Size = info.Size()
		case mode&fs.ModeSymlink != 0:
			typ = 'l'
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = target
		default:
			return nil
		}
		fmt.Fprintf(h, "%s\x00%c\x00%o\x00", rel, typ, tarMode(perm))
		switch typ {
		case 'l':
			fmt.Fprintf(h, "%s\x00", hdr.Linkname)
		case 'f':
			if tw != nil && bc.buildOf != "" && rel == bc.dockerfile {
				return writeDockerfile(h, tw, hdr, p, bc.buildOf)
			}
			if err := hashFile(h, tw, hdr, p); err != nil {
				return err
			}
			return nil
		}
		if tw != nil {
			return tw.WriteHeader(hdr)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading build context %s: %w", bc.dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashFile adds a regular file's size and content to h, and writes it to
// tw when set. The header's size is what was read, so a file that changes
// while it is read cannot corrupt the tar stream.
func hashFile(h io.Writer, tw *tar.Writer, hdr *tar.Header, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "%d\x00", hdr.Size)
	dst := h
	if tw != nil {
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		dst = io.MultiWriter(tw, h)
	}
	n, err := io.Copy(dst, io.LimitReader(f, hdr.Size))
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("%s changed while it was read", p)
	}
	return nil
}

// writeDockerfile hashes the Dockerfile as it is and writes it to tw with
// a LABEL labelBuildOf=buildOf after each FROM.
func writeDockerfile(h io.Writer, tw *tar.Writer, hdr *tar.Header, p, buildOf string) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if int64(len(data)) != hdr.Size {
		return fmt.Errorf("%s changed while it was read", p)
	}
	fmt.Fprintf(h, "%d\x00", hdr.Size)
	h.Write(data)
	out := labelAfterFrom(data, "LABEL "+labelBuildOf+"="+buildOf)
	h2 := *hdr
	h2.Size = int64(len(out))
	if err := tw.WriteHeader(&h2); err != nil {
		return err
	}
	_, err = tw.Write(out)
	return err
}

// directive is a Dockerfile parser directive line.
var directive = regexp.MustCompile(`^#\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(\S+)\s*$`)

// labelAfterFrom inserts the line instr after each FROM instruction of a
// Dockerfile, by the classic builder's line rules: parser directives
// (escape) at the top, whole-line comments, and lines continued with the
// escape character. A FROM continued to the end of the file gets none.
func labelAfterFrom(data []byte, instr string) []byte {
	escape := byte('\\')
	lines := strings.SplitAfter(string(data), "\n")
	directives := true
	var out strings.Builder
	inCont, isFrom := false, false
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		if directives {
			if m := directive.FindStringSubmatch(trimmed); m != nil {
				if strings.EqualFold(m[1], "escape") && len(m[2]) == 1 {
					escape = m[2][0]
				}
				out.WriteString(line)
				continue
			}
			directives = false
		}
		out.WriteString(line)
		if trimmed == "" || trimmed[0] == '#' {
			continue // blank lines and comments, also inside a continuation
		}
		if !inCont {
			word, _, _ := strings.Cut(strings.Fields(trimmed)[0], string(escape))
			isFrom = strings.EqualFold(word, "FROM")
		}
		inCont = trimmed[len(trimmed)-1] == escape
		if !inCont && isFrom {
			if !strings.HasSuffix(line, "\n") {
				out.WriteString("\n")
			}
			out.WriteString(instr + "\n")
			isFrom = false
		}
	}
	return []byte(out.String())
}

// tarMode converts Go permission bits to the tar (Unix) encoding.
func tarMode(perm fs.FileMode) uint32 {
	m := uint32(perm.Perm())
	if perm&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if perm&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if perm&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

// readDockerignore reads the context's .dockerignore; nil when there is none.
func readDockerignore(dir string) (*patternmatcher.PatternMatcher, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	if len(patterns) == 0 {
		return nil, nil
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return pm, nil
}

// shortHash is for messages.
func shortHash(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
