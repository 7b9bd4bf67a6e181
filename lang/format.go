package lang

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns native-syntax source in canonical form: aligned equals
// signs, consistent indentation and spacing. It does not check the source;
// FormatFile does.
func Format(src []byte) []byte {
	return hclwrite.Format(src)
}

// FormatFile formats native-syntax source after checking that it parses, so
// that a broken file is reported rather than mangled. filename is only for
// diagnostics.
func FormatFile(src []byte, filename string) ([]byte, hcl.Diagnostics) {
	_, diags := hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, diags
	}
	return hclwrite.Format(src), nil
}
