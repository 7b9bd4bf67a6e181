package lang

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// Configuration file names. A directory's configuration is the file named
// Bottlefile (native syntax) plus every *.bottle.hcl and *.bottle.json file
// beside it, merged as one.
const (
	Bottlefile     = "Bottlefile"
	HCLFileSuffix  = ".bottle.hcl"
	JSONFileSuffix = ".bottle.json"
)

// Parser reads and decodes configuration files. It keeps every file it read,
// so that diagnostics can be rendered with source snippets (see Files).
// A Parser is not safe for concurrent use.
type Parser struct {
	fsys   fs.FS // nil means the OS filesystem
	p      *hclparse.Parser
	parsed map[string]hcl.Diagnostics // parse diagnostics by filename; hclparse caches files but not their diagnostics
}

// NewParser returns a parser that reads the OS filesystem.
func NewParser() *Parser {
	return &Parser{p: hclparse.NewParser(), parsed: map[string]hcl.Diagnostics{}}
}

// NewParserFS returns a parser that reads fsys; the directories and files
// given to it are paths inside fsys (see io/fs.ValidPath).
func NewParserFS(fsys fs.FS) *Parser {
	p := NewParser()
	p.fsys = fsys
	return p
}

// Files returns every file the parser has read, by filename, for rendering
// diagnostics with snippets (WriteDiagnostics, DiagnosticsJSON).
func (p *Parser) Files() map[string]*hcl.File {
	return p.p.Files()
}

// LoadDir reads the configuration in dir, decodes and merges it, and
// validates it: names, references, cycles, and the types of every value that
// does not depend on an input variable. The returned Config is never nil; it
// holds whatever could be decoded, even when diagnostics have errors.
func (p *Parser) LoadDir(dir string) (*Config, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	cfg := newConfig(dir, p.absDir(dir), p.fsys)

	names, err := p.configFileNames(dir)
	if err != nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Failed to read configuration directory",
			Detail:   fmt.Sprintf("Cannot read the directory %q: %s.", dir, errText(err)),
		})
		return cfg, diags
	}
	if len(names) == 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No configuration files",
			Detail: fmt.Sprintf("The directory %q has no %s, *%s or *%s file. Write a %s there, or run bottlefile in the directory that has one.",
				dir, Bottlefile, HCLFileSuffix, JSONFileSuffix, Bottlefile),
		})
		return cfg, diags
	}

	var files []*hcl.File
	for _, name := range names {
		f, moreDiags := p.parseFile(p.join(dir, name))
		diags = append(diags, moreDiags...)
		// A native-syntax file that did not parse still has a useful
		// partial body; a JSON one does not.
		if f != nil && !(moreDiags.HasErrors() && strings.HasSuffix(name, ".json")) {
			files = append(files, f)
		}
	}
	syntaxErrors := diags.HasErrors()
	for _, f := range files {
		diags = append(diags, cfg.decodeFile(f)...)
	}
	if syntaxErrors {
		// What is missing from a broken file would show up as undeclared
		// references elsewhere: fix the syntax first.
		if len(cfg.Runtimes) == 0 {
			cfg.Runtimes[DefaultRuntime] = implicitRuntime()
		}
	} else {
		diags = append(diags, cfg.finish()...)
	}
	order := map[string]int{}
	for i, name := range names {
		order[p.join(dir, name)] = i + 1
	}
	sortDiagnostics(diags, order)
	return cfg, diags
}

// sortDiagnostics orders diagnostics by where they point: those without a
// range first, then by file (in the order given) and position. The sort is
// stable, so diagnostics at one place keep the order they were found in.
func sortDiagnostics(diags hcl.Diagnostics, order map[string]int) {
	key := func(d *hcl.Diagnostic) (int, int) {
		if d.Subject == nil {
			return 0, 0
		}
		return order[d.Subject.Filename], d.Subject.Start.Byte
	}
	sort.SliceStable(diags, func(i, j int) bool {
		fi, bi := key(diags[i])
		fj, bj := key(diags[j])
		if fi != fj {
			return fi < fj
		}
		return bi < bj
	})
}

// configFileNames lists the configuration files of dir: Bottlefile first,
// then the others in lexical order. Hidden files, editor backups and lock
// files are ignored.
func (p *Parser) configFileNames(dir string) ([]string, error) {
	var entries []fs.DirEntry
	var err error
	if p.fsys != nil {
		entries, err = fs.ReadDir(p.fsys, cleanFSPath(dir))
	} else {
		entries, err = os.ReadDir(dir)
	}
	if err != nil {
		return nil, err
	}
	var names []string
	hasBottlefile := false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") || strings.HasSuffix(name, "~") {
			continue
		}
		switch {
		case name == Bottlefile:
			hasBottlefile = true
		case strings.HasSuffix(name, HCLFileSuffix) && len(name) > len(HCLFileSuffix),
			strings.HasSuffix(name, JSONFileSuffix) && len(name) > len(JSONFileSuffix):
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if hasBottlefile {
		names = append([]string{Bottlefile}, names...)
	}
	return names, nil
}

// parseFile reads and parses one file, native or JSON syntax by its suffix.
func (p *Parser) parseFile(filename string) (*hcl.File, hcl.Diagnostics) {
	if f, ok := p.p.Files()[filename]; ok {
		return f, p.parsed[filename]
	}
	src, err := p.readFile(filename)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read file",
			Detail:   fmt.Sprintf("Cannot read %q: %s.", filename, errText(err)),
		}}
	}
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(filename, ".json") {
		f, diags = p.p.ParseJSON(src, filename)
	} else {
		f, diags = p.p.ParseHCL(src, filename)
	}
	p.parsed[filename] = diags
	return f, diags
}

func (p *Parser) readFile(name string) ([]byte, error) {
	if p.fsys != nil {
		return fs.ReadFile(p.fsys, cleanFSPath(name))
	}
	return os.ReadFile(name)
}

func (p *Parser) join(dir, name string) string {
	if p.fsys != nil {
		return path.Join(dir, name)
	}
	return filepath.Join(dir, name)
}

// absDir is the directory that relative paths in the configuration (build
// contexts, file and templatefile) are resolved against.
func (p *Parser) absDir(dir string) string {
	if p.fsys != nil {
		return cleanFSPath(dir)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return filepath.Clean(dir)
}

// cleanFSPath turns a path given for an fs.FS into a valid one.
func cleanFSPath(name string) string {
	name = path.Clean(filepath.ToSlash(name))
	name = strings.TrimPrefix(name, "/")
	if name == "" {
		return "."
	}
	return name
}

// errText is an error's text without the Go-specific *PathError prefix noise.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
