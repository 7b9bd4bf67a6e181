package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// Sensitive is how a redacted value is shown and recorded.
const Sensitive = "(sensitive value)"

// Unknown is how a value known only after apply is shown.
const Unknown = "(known after apply)"

// Fingerprint is the hash of an object's desired configuration, overall and
// per attribute. The overall hash goes on the object's config-hash label;
// the per-attribute hashes let the plan name what changed even when the
// values themselves are sensitive and not recorded.
type Fingerprint struct {
	Hash  string            // empty when some attribute is unknown
	Attrs map[string]string // attribute name to hash; missing when unknown
}

// FingerprintOf is the fingerprint the planner gives an object of this
// kind with these attributes, for those who record one without planning
// (a snapshot import).
func FingerprintOf(kind string, attrs map[string]cty.Value) Fingerprint {
	return fingerprint(kind, attrs, nil)
}

// fingerprint hashes the kind and the unmarked attribute values. An
// attribute named in keep takes the given hash instead of its own: that is
// how lifecycle.ignore_changes holds an attribute at its recorded value.
func fingerprint(kind string, attrs map[string]cty.Value, keep map[string]string) Fingerprint {
	fp := Fingerprint{Attrs: make(map[string]string, len(attrs))}
	known := true
	for name, v := range attrs {
		if h, ok := keep[name]; ok {
			fp.Attrs[name] = h
			continue
		}
		v, _ = v.UnmarkDeep()
		if !v.IsWhollyKnown() {
			known = false
			continue
		}
		data, err := json.Marshal(plain(v))
		if err != nil { // plain values always marshal; keep the hash honest anyway
			known = false
			continue
		}
		fp.Attrs[name] = attrHash(name, data)
	}
	if known {
		fp.Hash = wholeHash(kind, fp.Attrs)
	}
	return fp
}

// attrHash is the hash of one attribute whose plain value marshals to data.
func attrHash(name string, data []byte) string {
	h := sha256.Sum256(append([]byte(name+"="), data...))
	return hex.EncodeToString(h[:8])
}

// wholeHash is an object's configuration hash from its attributes' hashes.
func wholeHash(kind string, attrs map[string]string) string {
	whole := sha256.New()
	whole.Write([]byte(kind))
	for _, name := range sortedKeys(attrs) {
		whole.Write([]byte{0})
		whole.Write([]byte(name + "=" + attrs[name]))
	}
	return hex.EncodeToString(whole.Sum(nil)[:16])
}

// plain converts an unmarked, known value to JSON-encodable Go values.
func plain(v cty.Value) any {
	if v.IsNull() {
		return nil
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString()
	case t == cty.Number:
		bf := v.AsBigFloat()
		if bf.IsInt() {
			i, _ := bf.Int(nil)
			return json.Number(i.String())
		}
		return json.Number(bf.Text('g', -1))
	case t == cty.Bool:
		return v.True()
	case t.IsListType() || t.IsSetType() || t.IsTupleType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, plain(e))
		}
		return out
	case t.IsMapType() || t.IsObjectType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = plain(e)
		}
		return out
	}
	return v.GoString()
}

// redacted converts a value that may carry marks and unknowns into a
// JSON-encodable value in which marked parts read Sensitive and unknown
// parts read Unknown. Every mark bottlefile's language sets means "sensitive".
func redacted(v cty.Value) any {
	v, marks := v.Unmark()
	if len(marks) > 0 {
		return Sensitive
	}
	if !v.IsKnown() {
		return Unknown
	}
	if v.IsNull() {
		return nil
	}
	t := v.Type()
	switch {
	case t.IsListType() || t.IsSetType() || t.IsTupleType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, redacted(e))
		}
		return out
	case t.IsMapType() || t.IsObjectType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = redacted(e)
		}
		return out
	}
	return plain(v)
}

// RedactedJSON is the JSON form of a value as plans and state show it.
func RedactedJSON(v cty.Value) json.RawMessage {
	data, err := json.Marshal(redacted(v))
	if err != nil {
		return json.RawMessage(`"(unprintable)"`)
	}
	return data
}

// FormatJSON renders a JSON value the way HCL would write it, for humans.
func FormatJSON(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return string(raw)
	}
	return formatAny(v)
}

func formatAny(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if x == Sensitive || x == Unknown {
			return x
		}
		return Quote(x)
	case json.Number:
		return x.String()
	case bool:
		if x {
			return "true"
		}
		return "false"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatAny(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		if len(x) == 0 {
			return "{}"
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " = " + formatAny(x[k])
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	data, _ := json.Marshal(v)
	return string(data)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Quote writes a string as a JSON string without escaping &, < and >,
// which a plan shows as they are.
func Quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
