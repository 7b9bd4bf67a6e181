package lang

import (
	"os"
	"path/filepath"
	"testing"
)

func TestZZDump(t *testing.T) {
	dirs, _ := filepath.Glob(os.Getenv("GLOB"))
	for _, dir := range dirs {
		p := NewParser()
		_, diags := p.LoadDir(dir)
		os.Stdout.WriteString("=== " + dir + "\n")
		WriteDiagnostics(os.Stdout, p.Files(), diags, 100, false)
	}
}
