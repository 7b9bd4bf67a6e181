package lang

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// EnvVarPrefix starts the name of an environment variable that gives an
// input variable's value: BOTTLEFILE_VAR_api_key sets var.api_key.
const EnvVarPrefix = "BOTTLEFILE_VAR_"

// VarInputs are the places input variable values come from, other than
// defaults. lang reads no environment itself: the caller passes it.
type VarInputs struct {
	Vars     []string          // -var arguments, "NAME=VALUE", in command-line order
	VarFiles []string          // -var-file paths, in order; .json files are JSON, the others HCL
	Env      map[string]string // environment variables; only BOTTLEFILE_VAR_NAME entries are used
}

// VariableValues gathers input variable values from in, for NewScope. The
// precedence is -var (the last one of a name wins), then -var-file (the
// last file wins), then the environment; variables with none of them get
// their defaults in NewScope. Raw values from -var and the environment are
// taken as literal strings when the variable's type is a primitive one
// (string, number, bool; converted as needed), and parsed as HCL
// expressions otherwise, such as ["a", "b"] for a list. A value for an
// undeclared variable is an error from -var and -var-file; undeclared
// BOTTLEFILE_VAR_ entries are ignored, since the environment is shared.
// Values are converted to the variables' types, and those of sensitive
// variables are marked Sensitive.
func (p *Parser) VariableValues(cfg *Config, in VarInputs) (map[string]cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	vals := map[string]cty.Value{}
	ranges := map[string]hcl.Range{} // where each value was written, for conversion errors
	sources := map[string]string{}   // which option, file or environment variable gave it

	// Lowest precedence first; later sources overwrite.
	for _, key := range sortedKeys(in.Env) {
		name, ok := strings.CutPrefix(key, EnvVarPrefix)
		if !ok || name == "" {
			continue
		}
		v, ok := cfg.Variables[name]
		if !ok {
			continue
		}
		val, rng, moreDiags := p.rawValue(v, in.Env[key], "environment variable "+key)
		diags = append(diags, moreDiags...)
		vals[name], ranges[name], sources[name] = val, rng, "the environment variable "+key
	}

	for _, filename := range in.VarFiles {
		f, moreDiags := p.parseFile(filename)
		diags = append(diags, moreDiags...)
		if f == nil || moreDiags.HasErrors() {
			continue
		}
		attrs, moreDiags := f.Body.JustAttributes()
		diags = append(diags, moreDiags...)
		for _, name := range sortedKeys(attrs) {
			attr := attrs[name]
			if _, ok := cfg.Variables[name]; !ok {
				diags = append(diags, undeclaredVariable(cfg, name, "The variables file "+filename, attr.NameRange.Ptr()))
				continue
			}
			val, moreDiags := staticValue(attr.Expr, name)
			diags = append(diags, moreDiags...)
			if moreDiags.HasErrors() {
				continue
			}
			vals[name], ranges[name], sources[name] = val, attr.Expr.Range(), "the variables file "+filename
		}
	}

	for _, arg := range in.Vars {
		name, raw, ok := strings.Cut(arg, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("The option -var %q is not a variable name and a value separated by an equals sign, like -var 'name=value'.", arg),
			})
			continue
		}
		v, ok := cfg.Variables[name]
		if !ok {
			diags = append(diags, undeclaredVariable(cfg, name, "The option -var "+name+"=...", nil))
			continue
		}
		val, rng, moreDiags := p.rawValue(v, raw, "-var "+name)
		diags = append(diags, moreDiags...)
		source := fmt.Sprintf("the option -var %s", strings.TrimSpace(arg))
		if v.Sensitive {
			source = fmt.Sprintf("the option -var %s=... (sensitive, not shown)", name)
		}
		vals[name], ranges[name], sources[name] = val, rng, source
	}

	for _, name := range sortedKeys(vals) {
		v := cfg.Variables[name]
		cv, err := v.convert(vals[name])
		if err != nil {
			rng := ranges[name]
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid value for input variable",
				Detail:   fmt.Sprintf("The value given for var.%s by %s does not match its type %s: %s.", name, sources[name], typeString(v.Type), convertErrText(err)),
				Subject:  nonZero(rng),
			})
			delete(vals, name)
			continue
		}
		if v.Sensitive {
			cv = cv.Mark(Sensitive)
		}
		vals[name] = cv
	}
	return vals, diags
}

// rawValue interprets a value given as text, from -var or the environment.
// The text is kept as a file of the parser, so that diagnostics about it
// show it.
func (p *Parser) rawValue(v *Variable, raw, from string) (cty.Value, hcl.Range, hcl.Diagnostics) {
	filename := fmt.Sprintf("<value for var.%s>", v.Name)
	rng := hcl.Range{
		Filename: filename,
		Start:    hcl.Pos{Line: 1, Column: 1, Byte: 0},
		End:      hcl.Pos{Line: 1, Column: 1 + len(raw), Byte: len(raw)},
	}
	// A primitive type, or no type at all, takes the text as it is, as
	// Terraform does: -var name=reviewer means the string "reviewer". An
	// explicit complex type (or `any`) parses it as HCL.
	if v.Type.IsPrimitiveType() || v.TypeRange == (hcl.Range{}) {
		return cty.StringVal(raw), hcl.Range{}, nil
	}
	if !v.Sensitive {
		p.p.AddFile(filename, &hcl.File{Bytes: []byte(raw), Body: hcl.EmptyBody()})
	}
	expr, diags := hclsyntax.ParseExpression([]byte(raw), filename, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() && v.Sensitive {
		return cty.DynamicVal, hcl.Range{}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for input variable",
			Detail:   fmt.Sprintf("The value of %s is not a valid HCL expression, which var.%s needs for its type %s. It is sensitive, so it is not shown.", from, v.Name, typeString(v.Type)),
		}}
	}
	if diags.HasErrors() {
		return cty.DynamicVal, rng, prefixDetail(diags, fmt.Sprintf("The value of %s is parsed as an HCL expression, because var.%s has the type %s. ", from, v.Name, typeString(v.Type)))
	}
	val, moreDiags := staticValue(expr, v.Name)
	diags = append(diags, moreDiags...)
	return val, rng, diags
}

func prefixDetail(diags hcl.Diagnostics, prefix string) hcl.Diagnostics {
	for _, d := range diags {
		d.Detail = prefix + d.Detail
	}
	return diags
}

func nonZero(r hcl.Range) *hcl.Range {
	if r == (hcl.Range{}) {
		return nil
	}
	return r.Ptr()
}
