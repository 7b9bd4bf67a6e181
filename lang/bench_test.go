package lang

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// bottlefileOf writes a configuration of n agents, each with a sidecar, an
// egress allowlist built from a local, a snapshot policy, env referring to
// a variable and to the previous agent, and a depends_on.
func bottlefileOf(n int) []byte {
	var b strings.Builder
	b.WriteString(`variable "image" {
  type    = string
  default = "ghcr.io/acme/agent:1.4"
}

variable "token" {
  type      = string
  sensitive = true
  default   = "not-a-secret"
}

locals {
  hosts = ["api.anthropic.com:443", "github.com:443"]
}

`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `agent "agent-%d" {
  image   = var.image
  command = ["claude", "--agent", "%d"]
  env = {
    TOKEN = var.token
    INDEX = "%d"
`, i, i, i)
		if i > 0 {
			fmt.Fprintf(&b, "    PREV  = agent.agent-%d.id\n", i-1)
		}
		b.WriteString("  }\n")
		if i > 0 {
			fmt.Fprintf(&b, "  depends_on = [agent.agent-%d]\n", i-1)
		}
		b.WriteString(`  workdir = "/workspace"
  cpus    = 1
  memory  = "2GiB"

  egress {
    allow = concat(local.hosts, ["*.pythonhosted.org:443"])
  }

  sidecar "git-gate" {
    image = "acme/git-gate:2"
  }

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 3
    max_age   = "720h"
  }
}

`)
	}
	return []byte(b.String())
}

// BenchmarkLoad2000Agents validates (LoadDir: parse, decode, references,
// cycles, evaluation with unknown variables) a Bottlefile of 2,000 agents.
func BenchmarkLoad2000Agents(b *testing.B) {
	src := bottlefileOf(2000)
	fsys := fstest.MapFS{"proj/Bottlefile": {Data: src}}
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := NewParserFS(fsys)
		cfg, diags := p.LoadDir("proj")
		if len(diags) > 0 || len(cfg.Agents) != 2000 {
			b.Fatalf("%d agents, diagnostics: %v", len(cfg.Agents), diags)
		}
	}
}

// BenchmarkEval2000Agents evaluates every agent of the same configuration
// in a scope with variable values, as plan does after loading.
func BenchmarkEval2000Agents(b *testing.B) {
	fsys := fstest.MapFS{"proj/Bottlefile": {Data: bottlefileOf(2000)}}
	p := NewParserFS(fsys)
	cfg, diags := p.LoadDir("proj")
	if len(diags) > 0 {
		b.Fatal(diags)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, diags := cfg.NewScope(nil)
		if len(diags) > 0 {
			b.Fatal(diags)
		}
		for _, name := range cfg.AgentNames() {
			if _, diags := s.EvalAgent(cfg.Agents[name]); len(diags) > 0 {
				b.Fatal(diags)
			}
		}
	}
}
