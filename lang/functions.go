package lang

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Functions returns the functions a Bottlefile's expressions can call: the
// go-cty standard library (strings, collections, encoding, numbers, sets,
// dates, regular expressions), conversions (tostring, tolist, ...), try and
// can, a few hashes and encodings, and file and templatefile, which read
// files relative to the configuration's directory. None of them reads the
// environment.
func (c *Config) Functions() map[string]function.Function {
	return functions(c.baseDir, c.fsys)
}

func functions(baseDir string, fsys fs.FS) map[string]function.Function {
	funcs := map[string]function.Function{
		// numeric
		"abs":      stdlib.AbsoluteFunc,
		"ceil":     stdlib.CeilFunc,
		"floor":    stdlib.FloorFunc,
		"log":      stdlib.LogFunc,
		"max":      stdlib.MaxFunc,
		"min":      stdlib.MinFunc,
		"parseint": stdlib.ParseIntFunc,
		"pow":      stdlib.PowFunc,
		"signum":   stdlib.SignumFunc,

		// string
		"chomp":       stdlib.ChompFunc,
		"format":      stdlib.FormatFunc,
		"formatlist":  stdlib.FormatListFunc,
		"indent":      stdlib.IndentFunc,
		"join":        stdlib.JoinFunc,
		"lower":       stdlib.LowerFunc,
		"regex":       stdlib.RegexFunc,
		"regexall":    stdlib.RegexAllFunc,
		"replace":     stdlib.ReplaceFunc,
		"split":       stdlib.SplitFunc,
		"strlen":      stdlib.StrlenFunc,
		"strrev":      stdlib.ReverseFunc,
		"substr":      stdlib.SubstrFunc,
		"title":       stdlib.TitleFunc,
		"trim":        stdlib.TrimFunc,
		"trimprefix":  stdlib.TrimPrefixFunc,
		"trimspace":   stdlib.TrimSpaceFunc,
		"trimsuffix":  stdlib.TrimSuffixFunc,
		"upper":       stdlib.UpperFunc,
		"startswith":  stringPredicate("prefix", strings.HasPrefix),
		"endswith":    stringPredicate("suffix", strings.HasSuffix),
		"strcontains": stringPredicate("substr", strings.Contains),

		// collection
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        stdlib.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"keys":            stdlib.KeysFunc,
		"length":          lengthFunc,
		"lookup":          stdlib.LookupFunc,
		"merge":           stdlib.MergeFunc,
		"range":           stdlib.RangeFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,

		// encoding
		"base64decode": base64DecodeFunc,
		"base64encode": base64EncodeFunc,
		"csvdecode":    stdlib.CSVDecodeFunc,
		"jsondecode":   stdlib.JSONDecodeFunc,
		"jsonencode":   stdlib.JSONEncodeFunc,
		"urlencode":    urlEncodeFunc,

		// hashes
		"md5":    hashFunc(func(b []byte) []byte { s := md5.Sum(b); return s[:] }),
		"sha1":   hashFunc(func(b []byte) []byte { s := sha1.Sum(b); return s[:] }),
		"sha256": hashFunc(func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }),
		"sha512": hashFunc(func(b []byte) []byte { s := sha512.Sum512(b); return s[:] }),

		// date and time, on given values only: there is no timestamp()
		"formatdate": stdlib.FormatDateFunc,
		"timeadd":    stdlib.TimeAddFunc,

		// type conversion
		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"toset":    stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring": stdlib.MakeToFunc(cty.String),

		"can": tryfunc.CanFunc,
		"try": tryfunc.TryFunc,
	}
	fr := fileReader{baseDir: baseDir, fsys: fsys}
	funcs["file"] = fr.fileFunc()
	funcs["fileexists"] = fr.fileExistsFunc()
	// templatefile may call every function but itself.
	funcs["templatefile"] = fr.templateFileFunc(funcs)
	return funcs
}

// fileReader reads files relative to the configuration's directory.
type fileReader struct {
	baseDir string
	fsys    fs.FS // nil: the OS filesystem
}

func (fr fileReader) resolve(p string) string {
	if fr.fsys != nil {
		if path.IsAbs(p) {
			return cleanFSPath(p)
		}
		return cleanFSPath(path.Join(fr.baseDir, filepath.ToSlash(p)))
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(fr.baseDir, p)
}

func (fr fileReader) read(p string) ([]byte, error) {
	name := fr.resolve(p)
	var src []byte
	var err error
	if fr.fsys != nil {
		src, err = fs.ReadFile(fr.fsys, name)
	} else {
		src, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %s", p, errText(err))
	}
	return src, nil
}

func (fr fileReader) readText(p string) (string, error) {
	src, err := fr.read(p)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(src) {
		return "", fmt.Errorf("%s is not valid UTF-8 text", p)
	}
	return string(src), nil
}

func (fr fileReader) fileFunc() function.Function {
	return function.New(&function.Spec{
		Description: "Reads a text file, relative to the configuration's directory.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			s, err := fr.readText(args[0].AsString())
			if err != nil {
				return cty.UnknownVal(cty.String), function.NewArgError(0, err)
			}
			return cty.StringVal(s), nil
		},
	})
}

func (fr fileReader) fileExistsFunc() function.Function {
	return function.New(&function.Spec{
		Description: "Reports whether a file exists, relative to the configuration's directory.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			name := fr.resolve(args[0].AsString())
			var fi fs.FileInfo
			var err error
			if fr.fsys != nil {
				fi, err = fs.Stat(fr.fsys, name)
			} else {
				fi, err = os.Stat(name)
			}
			if err != nil {
				if os.IsNotExist(err) || errorsIsNotExist(err) {
					return cty.False, nil
				}
				return cty.UnknownVal(cty.Bool), function.NewArgError(0, fmt.Errorf("cannot stat %s: %s", args[0].AsString(), errText(err)))
			}
			return cty.BoolVal(fi.Mode().IsRegular()), nil
		},
	})
}

func errorsIsNotExist(err error) bool {
	return strings.Contains(err.Error(), fs.ErrNotExist.Error())
}

// templateFileFunc renders a template file with the given variables. The
// template sees only those variables and the functions in funcs (which it
// reads when called, so templatefile itself is left out by name).
func (fr fileReader) templateFileFunc(funcs map[string]function.Function) function.Function {
	render := func(args []cty.Value) (cty.Value, error) {
		p := args[0].AsString()
		src, err := fr.readText(p)
		if err != nil {
			return cty.DynamicVal, function.NewArgError(0, err)
		}
		expr, diags := hclsyntax.ParseTemplate([]byte(src), p, hcl.Pos{Line: 1, Column: 1})
		if diags.HasErrors() {
			return cty.DynamicVal, function.NewArgErrorf(0, "template %s: %s", p, diags.Error())
		}
		varsVal := args[1]
		if !varsVal.IsWhollyKnown() {
			return cty.DynamicVal, nil
		}
		if varsVal.IsNull() || !(varsVal.Type().IsObjectType() || varsVal.Type().IsMapType()) {
			return cty.DynamicVal, function.NewArgErrorf(1, "the template variables must be an object or a map")
		}
		vars := map[string]cty.Value{}
		for it := varsVal.ElementIterator(); it.Next(); {
			k, v := it.Element()
			if !hclsyntax.ValidIdentifier(k.AsString()) {
				return cty.DynamicVal, function.NewArgErrorf(1, "%q is not a valid template variable name", k.AsString())
			}
			vars[k.AsString()] = v
		}
		for _, t := range expr.Variables() {
			if _, ok := vars[t.RootName()]; !ok {
				return cty.DynamicVal, function.NewArgErrorf(1, "template %s, line %d: there is no variable named %q in the map given to templatefile", p, t.SourceRange().Start.Line, t.RootName())
			}
		}
		inner := map[string]function.Function{}
		for name, f := range funcs {
			if name != "templatefile" {
				inner[name] = f
			}
		}
		val, diags := expr.Value(&hcl.EvalContext{Variables: vars, Functions: inner})
		if diags.HasErrors() {
			return cty.DynamicVal, function.NewArgErrorf(0, "template %s: %s", p, diags.Error())
		}
		return val, nil
	}
	return function.New(&function.Spec{
		Description: "Renders a template file, relative to the configuration's directory, with the given variables.",
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			{Name: "vars", Type: cty.DynamicPseudoType, AllowUnknown: true},
		},
		Type: func(args []cty.Value) (cty.Type, error) {
			if !args[1].IsWhollyKnown() {
				return cty.DynamicPseudoType, nil
			}
			v, err := render(args)
			if err != nil {
				return cty.DynamicPseudoType, err
			}
			return v.Type(), nil
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if !args[1].IsWhollyKnown() {
				return cty.DynamicVal, nil
			}
			return render(args)
		},
	})
}

var base64EncodeFunc = function.New(&function.Spec{
	Description: "Encodes a string with standard base64.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
	},
})

var base64DecodeFunc = function.New(&function.Spec{
	Description: "Decodes a standard base64 string holding UTF-8 text.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		b, err := base64.StdEncoding.DecodeString(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the string is not valid base64")
		}
		if !utf8.Valid(b) {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the decoded bytes are not valid UTF-8")
		}
		return cty.StringVal(string(b)), nil
	},
})

var urlEncodeFunc = function.New(&function.Spec{
	Description: "Escapes a string for use in a URL query.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(url.QueryEscape(args[0].AsString())), nil
	},
})

func hashFunc(sum func([]byte) []byte) function.Function {
	return function.New(&function.Spec{
		Description: "Hashes a string, returning hex digits.",
		Params:      []function.Parameter{{Name: "str", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.StringVal(hex.EncodeToString(sum([]byte(args[0].AsString())))), nil
		},
	})
}

func stringPredicate(second string, f func(s, x string) bool) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: "str", Type: cty.String},
			{Name: second, Type: cty.String},
		},
		Type: function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

// lengthFunc is the length of a collection, or of a string in characters,
// as in Terraform.
var lengthFunc = function.New(&function.Spec{
	Description: "The number of elements of a collection, or of characters in a string.",
	Params: []function.Parameter{{
		Name: "value", Type: cty.DynamicPseudoType,
		AllowDynamicType: true, AllowUnknown: true, AllowMarked: true,
	}},
	Type: function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		if v.Type() == cty.String {
			return stdlib.Strlen(v)
		}
		return stdlib.Length(v)
	},
})
