package lang

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/bottlefile/bottlefile/egress"

	"github.com/bottlefile/bottlefile/workloadattr"
)

// A credential block in an egress block: a secret the gateway puts into
// the requests to one host, so that the workload never holds it.
//
//	egress {
//	  allow = ["api.anthropic.com:443"]
//	  credential "anthropic" {
//	    host   = "api.anthropic.com"     # a name or address, port 443 unless given
//	    header = "x-api-key"
//	    prefix = "Bearer "               # optional, put before the value
//	    value  = var.anthropic_key       # always sensitive
//	    env    = "ANTHROPIC_API_KEY"     # optional: holds a placeholder in the workload
//	  }
//	}
//
// Evaluated, the workload's "credentials" attribute is a list of
// CredentialType objects in the order written (null without any): host
// canonical (lower case), port a number, prefix and env "" when unset, and
// value marked sensitive whatever it came from.

// CredentialType is the type of one evaluated credential.
var CredentialType = workloadattr.CredentialType

var credentialSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "host", Required: true},
	{Name: "header", Required: true},
	{Name: "prefix"},
	{Name: "value", Required: true},
	{Name: "env"},
}}

// credentialBlock is one credential block as written.
type credentialBlock struct {
	block   *hcl.Block
	content *hcl.BodyContent
}

func (c credentialBlock) expr(name string) hcl.Expression {
	if a, ok := c.content.Attributes[name]; ok {
		return a.Expr
	}
	return nil
}

// CredentialRange is the range of the named credential block's header in
// the workload's egress block; false when there is none.
func (w *Workload) CredentialRange(name string) (hcl.Range, bool) {
	for _, c := range w.creds {
		if c.block.Labels[0] == name {
			return c.block.DefRange, true
		}
	}
	return hcl.Range{}, false
}

// egressSchema is the schema of an egress block: its rows and credential
// blocks.
func egressSchema(fields []workloadField) *hcl.BodySchema {
	return &hcl.BodySchema{
		Attributes: fieldSchemas(fields),
		Blocks:     []hcl.BlockHeaderSchema{{Type: "credential", LabelNames: []string{"name"}}},
	}
}

// decodeCredentials takes the credential blocks out of an egress block's
// content, checking their structure.
func (w *Workload) decodeCredentials(egress *hcl.BodyContent) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[string]hcl.Range{}
	for _, b := range egress.Blocks {
		if b.Type != "credential" {
			continue
		}
		name := b.Labels[0]
		diags = append(diags, checkName("credential", name, labelRange(b, 0))...)
		if prev, ok := seen[name]; ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate credential block",
				Detail:   fmt.Sprintf("A credential named %q is already declared at %s.", name, prev),
				Subject:  b.DefRange.Ptr(),
			})
			continue
		}
		seen[name] = b.DefRange
		c, moreDiags := b.Body.Content(credentialSchema)
		diags = append(diags, moreDiags...)
		w.creds = append(w.creds, credentialBlock{block: b, content: c})
	}
	return diags
}

// credentialExprs is every expression of the credential blocks.
func (w *Workload) credentialExprs() []hcl.Expression {
	var out []hcl.Expression
	for _, c := range w.creds {
		for _, a := range credentialSchema.Attributes {
			if e := c.expr(a.Name); e != nil {
				out = append(out, e)
			}
		}
	}
	return out
}

// hopHeaders are headers a credential cannot be put in: they are the
// connection's or the proxy's, not the request's.
var hopHeaders = []string{"host", "connection", "content-length", "transfer-encoding", "te", "trailer", "upgrade", "keep-alive", "proxy-authorization", "proxy-authenticate", "proxy-connection"}

// evalCredentials evaluates and checks the credential blocks; allow is the
// evaluated allow list and env the workload's env, which the checks
// compare against.
func (s *Scope) evalCredentials(ctx *hcl.EvalContext, w *Workload, allow, env cty.Value) (cty.Value, hcl.Diagnostics) {
	if len(w.creds) == 0 {
		return cty.NullVal(cty.List(CredentialType)), nil
	}
	var diags hcl.Diagnostics
	var rules []egress.Rule
	rulesKnown := false
	if a := unmarkDeep(allow); a.IsWhollyKnown() && !a.IsNull() {
		rulesKnown = true
		for _, e := range a.AsValueSlice() {
			if r, err := egress.ParseRule(e.AsString()); err == nil {
				rules = append(rules, r)
			}
		}
	}
	envs := map[string]string{}  // env name -> credential
	dests := map[string]string{} // host:port header -> credential
	var vals []cty.Value
	for _, c := range w.creds {
		name := c.block.Labels[0]
		str := func(attr string) (cty.Value, hcl.Expression, bool) {
			expr := c.expr(attr)
			if expr == nil {
				return cty.StringVal(""), nil, false
			}
			v, moreDiags := s.evalAttr(ctx, expr, attr, cty.String)
			diags = append(diags, moreDiags...)
			if moreDiags.HasErrors() {
				return cty.UnknownVal(cty.String), expr, false
			}
			u := unmarkDeep(v)
			if u.IsNull() {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing credential " + attr,
					Detail: fmt.Sprintf("Credential %q needs a %s; it is null.", name, attr), Subject: expr.Range().Ptr()})
				return cty.UnknownVal(cty.String), expr, false
			}
			return v, expr, u.IsKnown()
		}
		bad := func(expr hcl.Expression, summary, detail string) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: expr.Range().Ptr()})
		}

		obj := map[string]cty.Value{"name": cty.StringVal(name)}

		// host: a name or an address, without a wildcard; port 443 unless given.
		hostV, hostExpr, ok := str("host")
		obj["host"], obj["port"] = cty.UnknownVal(cty.String), cty.UnknownVal(cty.Number)
		if ok {
			hostV = unmarkDeep(hostV) // where a credential goes is no secret
			h := hostV.AsString()
			r, err := egress.ParseRule(h)
			switch {
			case err != nil:
				bad(hostExpr, "Invalid credential host", fmt.Sprintf("%q is not a host: %s", h, CheckEgressRule(h)))
			case r.Wildcard || (r.Prefix.IsValid() && !r.Prefix.IsSingleIP()):
				bad(hostExpr, "Invalid credential host", fmt.Sprintf("A credential goes to one host, named or an address, not to %q: the gateway makes a certificate for exactly that host.", h))
			default:
				port := r.Port
				if port == 0 {
					port = 443
				}
				host := r.Host
				if r.Prefix.IsValid() {
					host = r.Prefix.Addr().String()
				}
				obj["host"], obj["port"] = cty.StringVal(host), cty.NumberIntVal(int64(port))
				if _, ok := egress.Match(rules, host, port); rulesKnown && !ok {
					bad(hostExpr, "Credential host not allowed", fmt.Sprintf("Credential %q goes to %s:%d, which the egress block's allow list does not open; add a rule for it (like %q), or the workload can never reach it.", name, host, port, fmt.Sprintf("%s:%d", host, port)))
				}
			}
		}

		headerV, headerExpr, ok := str("header")
		obj["header"] = cty.UnknownVal(cty.String)
		if ok {
			h := strings.ToLower(unmarkDeep(headerV).AsString())
			switch {
			case !isToken(h):
				bad(headerExpr, "Invalid credential header", fmt.Sprintf("%q is not an HTTP header name: a name like \"x-api-key\" or \"authorization\".", h))
			case contains(hopHeaders, h):
				bad(headerExpr, "Invalid credential header", fmt.Sprintf("%q belongs to the connection or the proxy, not to the request; a credential goes in a request header like \"authorization\".", h))
			default:
				obj["header"] = cty.StringVal(h)
			}
		}
		if h, p := obj["host"], obj["port"]; h.IsKnown() && obj["header"].IsKnown() {
			key := fmt.Sprintf("%s:%s %s", h.AsString(), p.AsBigFloat().String(), obj["header"].AsString())
			if prev, ok := dests[key]; ok {
				bad(headerExpr, "Conflicting credentials", fmt.Sprintf("Credentials %q and %q both set header %q for %s:%s; the gateway can put only one value there.", prev, name, obj["header"].AsString(), h.AsString(), p.AsBigFloat().String()))
			}
			dests[key] = name
		}

		prefixV, prefixExpr, ok := str("prefix")
		obj["prefix"] = prefixV
		if ok && strings.ContainsAny(unmarkDeep(prefixV).AsString(), "\r\n\x00") {
			bad(prefixExpr, "Invalid credential prefix", "A header value cannot hold a line break or a NUL character.")
		}

		valueV, valueExpr, ok := str("value")
		if ok && !IsSensitive(valueV) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Credential value not from a sensitive variable",
				Detail:   fmt.Sprintf("The value of credential %q does not come from a variable declared sensitive = true. bottlefile treats it as sensitive from here on, but a literal is in the Bottlefile for anyone who reads it, and the -var value of a variable not declared sensitive is kept in saved plans. Give it through a variable with sensitive = true.", name),
				Subject:  valueExpr.Range().Ptr(),
			})
		}
		if ok {
			u := unmarkDeep(valueV).AsString()
			switch {
			case u == "":
				bad(valueExpr, "Invalid credential value", fmt.Sprintf("Credential %q has an empty value.", name))
			case strings.ContainsAny(u, "\r\n\x00"):
				bad(valueExpr, "Invalid credential value", fmt.Sprintf("The value of credential %q holds a line break or a NUL character, which a header cannot; its value is not shown.", name))
			}
		}
		obj["value"] = unmarkDeep(valueV).Mark(Sensitive)

		envV, envExpr, ok := str("env")
		obj["env"] = unmarkDeep(envV)
		if ok {
			e := unmarkDeep(envV).AsString()
			switch {
			case !isEnvName(e):
				bad(envExpr, "Invalid credential env", fmt.Sprintf("%q is not an environment variable name: letters, digits and underscores, not starting with a digit.", e))
			case envSets(env, e):
				bad(envExpr, "Conflicting credential env", fmt.Sprintf("The env attribute sets %s too; the workload gets the credential's placeholder there. Remove %s from env.", e, e))
			case envs[e] != "":
				bad(envExpr, "Conflicting credential env", fmt.Sprintf("Credentials %q and %q both name %s.", envs[e], name, e))
			default:
				envs[e] = name
			}
		}
		vals = append(vals, cty.ObjectVal(obj))
	}
	return cty.ListVal(vals), diags
}

// envSets reports whether the env map sets key (unknown maps do not).
func envSets(env cty.Value, key string) bool {
	env = unmarkDeep(env)
	if env.IsNull() || !env.IsKnown() {
		return false
	}
	return env.Type().IsMapType() && env.HasIndex(cty.StringVal(key)).True()
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}
