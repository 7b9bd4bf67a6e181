package lang

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Config is a directory's configuration, all its files merged.
type Config struct {
	Dir       string // the directory given to LoadDir
	Variables map[string]*Variable
	Locals    map[string]*Local
	Runtimes  map[string]*Runtime // always has "default" {Driver: "docker", Implicit: true} when no runtime block is declared
	Agents    map[string]*Agent
	Snapshots map[string]*Snapshot
	Outputs   map[string]*Output
	// Moved holds the moved blocks, in the order written (moved.go).
	Moved []*Moved
	// Backend is the backend block: where the state is kept; nil for the
	// file in the directory (backend.go).
	Backend *Backend

	// agentBlocks and snapshotBlocks are the blocks as declared, once
	// NewScope replaced those with for_each or count in Agents and
	// Snapshots by their instances (expansion.go); nil before.
	agentBlocks    map[string]*Agent
	snapshotBlocks map[string]*Snapshot

	baseDir string // Dir made absolute (or cleaned, inside fsys): what relative paths resolve against
	fsys    fs.FS  // nil: the OS filesystem
	// invalid holds the ranges of expressions with invalid references,
	// already reported: evaluating them would report the same in other words.
	invalid map[hcl.Range]bool
}

func newConfig(dir, baseDir string, fsys fs.FS) *Config {
	return &Config{
		Dir:       dir,
		Variables: map[string]*Variable{},
		Locals:    map[string]*Local{},
		Runtimes:  map[string]*Runtime{},
		Agents:    map[string]*Agent{},
		Snapshots: map[string]*Snapshot{},
		Outputs:   map[string]*Output{},
		baseDir:   baseDir,
		fsys:      fsys,
		invalid:   map[hcl.Range]bool{},
	}
}

// AgentNames returns the names of the declared agents, sorted.
func (c *Config) AgentNames() []string { return sortedKeys(c.Agents) }

// SnapshotNames returns the names of the declared snapshots, sorted.
func (c *Config) SnapshotNames() []string { return sortedKeys(c.Snapshots) }

// RuntimeNames returns the names of the runtimes, sorted.
func (c *Config) RuntimeNames() []string { return sortedKeys(c.Runtimes) }

// OutputNames returns the names of the declared outputs, sorted.
func (c *Config) OutputNames() []string { return sortedKeys(c.Outputs) }

// VariableNames returns the names of the declared variables, sorted.
func (c *Config) VariableNames() []string { return sortedKeys(c.Variables) }

// BaseDir is the absolute directory that relative paths in the configuration
// (build contexts, file, templatefile) are resolved against. For a parser
// made with NewParserFS it is the directory's path inside the fs.FS.
func (c *Config) BaseDir() string { return c.baseDir }

// fileSchema is the top level of every configuration file.
var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "runtime", LabelNames: []string{"name"}},
		{Type: "agent", LabelNames: []string{"name"}},
		{Type: "snapshot", LabelNames: []string{"name"}},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "moved"},
		{Type: "backend", LabelNames: []string{"type"}},
	},
}

// decodeFile decodes one file's blocks into c.
func (c *Config) decodeFile(f *hcl.File) hcl.Diagnostics {
	var diags hcl.Diagnostics
	content, moreDiags := f.Body.Content(fileSchema)
	diags = append(diags, moreDiags...)
	if content == nil {
		return diags
	}
	for _, block := range content.Blocks {
		switch block.Type {
		case "variable":
			v, moreDiags := decodeVariableBlock(block)
			diags = append(diags, moreDiags...)
			if v != nil {
				if prev, ok := c.Variables[v.Name]; ok {
					diags = append(diags, duplicate("variable", v.Name, prev.DeclRange, block))
				} else {
					c.Variables[v.Name] = v
				}
			}
		case "locals":
			locals, moreDiags := decodeLocalsBlock(block)
			diags = append(diags, moreDiags...)
			for _, l := range locals {
				if prev, ok := c.Locals[l.Name]; ok {
					diags = append(diags, &hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Duplicate local value",
						Detail:   fmt.Sprintf("A local value named %q was already defined at %s. Local value names must be unique.", l.Name, prev.DeclRange),
						Subject:  l.NameRange.Ptr(),
					})
				} else {
					c.Locals[l.Name] = l
				}
			}
		case "runtime":
			r, moreDiags := decodeRuntimeBlock(block)
			diags = append(diags, moreDiags...)
			if r != nil {
				if prev, ok := c.Runtimes[r.Name]; ok {
					diags = append(diags, duplicate("runtime", r.Name, prev.DeclRange, block))
				} else {
					c.Runtimes[r.Name] = r
				}
			}
		case "agent":
			a, moreDiags := decodeAgentBlock(block)
			diags = append(diags, moreDiags...)
			if a != nil {
				if prev, ok := c.Agents[a.Name]; ok {
					diags = append(diags, duplicate("agent", a.Name, prev.DeclRange, block))
				} else {
					c.Agents[a.Name] = a
				}
			}
		case "snapshot":
			s, moreDiags := decodeSnapshotBlock(block)
			diags = append(diags, moreDiags...)
			if s != nil {
				if prev, ok := c.Snapshots[s.Name]; ok {
					diags = append(diags, duplicate("snapshot", s.Name, prev.DeclRange, block))
				} else {
					c.Snapshots[s.Name] = s
				}
			}
		case "backend":
			diags = append(diags, c.decodeBackend(block)...)
		case "moved":
			m, moreDiags := decodeMovedBlock(block)
			diags = append(diags, moreDiags...)
			if m != nil {
				c.Moved = append(c.Moved, m)
			}
		case "output":
			o, moreDiags := decodeOutputBlock(block)
			diags = append(diags, moreDiags...)
			if o != nil {
				if prev, ok := c.Outputs[o.Name]; ok {
					diags = append(diags, duplicate("output", o.Name, prev.DeclRange, block))
				} else {
					c.Outputs[o.Name] = o
				}
			}
		}
	}
	return diags
}

// finish runs the checks that need the whole configuration: the implicit
// runtime, references between blocks, cycles, and an evaluation of every
// expression with unknown input variables.
func (c *Config) finish() hcl.Diagnostics {
	var diags hcl.Diagnostics
	if len(c.Runtimes) == 0 {
		c.Runtimes[DefaultRuntime] = implicitRuntime()
	}
	diags = append(diags, c.checkReferences()...)
	diags = append(diags, c.checkMoved()...)
	diags = append(diags, c.CheckCycles()...)
	// Expressions with invalid references are left out of this.
	diags = append(diags, c.validateValues()...)
	return diags
}

// duplicate is the error for a second block of a kind with the same name.
func duplicate(kind, name string, prev hcl.Range, block *hcl.Block) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Duplicate %s %q", kind, name),
		Detail:   fmt.Sprintf("%s named %q was already declared at %s. Each %s needs a unique name.", capitalize(article(kind)), name, prev, kind),
		Subject:  labelRange(block, 0).Ptr(),
	}
}

// labelRange is the range of a block's i'th label, or of its type keyword
// when the label is missing.
func labelRange(block *hcl.Block, i int) hcl.Range {
	if i < len(block.LabelRanges) {
		return block.LabelRanges[i]
	}
	return block.DefRange
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
