package main

import (
	"fmt"
	"io"
	"strings"
)

// flagSpec is one option of a subcommand, as clap declares it.
type flagSpec struct {
	long  string // "name" for --name
	short byte   // 'n' for -n; 0 when there is no short form
	value string // value name ("NAME"); empty for a boolean switch
	multi bool   // may be given more than once
}

// display is how clap names the option in its messages: "--name <NAME>".
func (f flagSpec) display() string {
	if f.value == "" {
		return "--" + f.long
	}
	return "--" + f.long + " <" + f.value + ">"
}

// cmdSpec is one subcommand's argument surface.
type cmdSpec struct {
	usage    string // "smolvm machine create [OPTIONS] [-- <WORKLOAD>...]"
	flags    []flagSpec
	trailing string // value name of the arguments after "--"; empty when none are taken
	// trailingRequired makes "-- CMD..." mandatory (exec).
	trailingRequired bool
	// required names long flags that must be given.
	required []string
}

// parsed holds what a command line gave.
type parsed struct {
	values   map[string][]string
	switches map[string]bool
	trailing []string
	help     bool
}

func (p *parsed) has(long string) bool {
	return p.switches[long] || len(p.values[long]) > 0
}

func (p *parsed) value(long string) (string, bool) {
	v := p.values[long]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// usageError is a clap parse error: it goes to stderr and exits 2.
type usageError struct {
	msg   string
	usage string
}

func (e *usageError) Error() string { return e.msg }

func (e *usageError) write(w io.Writer) {
	fmt.Fprintf(w, "error: %s\n\nUsage: %s\n\nFor more information, try '--help'.\n", e.msg, e.usage)
}

// parse reads args against spec the way clap does for smolvm's
// subcommands: long options as --x v or --x=v, short ones as -x v or -xv,
// switches clustered (-it), no positional arguments, and everything after
// "--" taken verbatim as the trailing command.
func (spec cmdSpec) parse(args []string) (*parsed, *usageError) {
	p := &parsed{values: map[string][]string{}, switches: map[string]bool{}}
	fail := func(format string, a ...any) (*parsed, *usageError) {
		return nil, &usageError{msg: fmt.Sprintf(format, a...), usage: spec.usage}
	}
	byLong := map[string]flagSpec{}
	byShort := map[byte]flagSpec{}
	for _, f := range spec.flags {
		byLong[f.long] = f
		if f.short != 0 {
			byShort[f.short] = f
		}
	}
	seen := map[string]bool{}
	add := func(f flagSpec, v string, isSwitch bool) *usageError {
		if seen[f.long] && !f.multi {
			return &usageError{msg: fmt.Sprintf("the argument '%s' cannot be used multiple times", f.display()), usage: spec.usage}
		}
		seen[f.long] = true
		if isSwitch {
			p.switches[f.long] = true
		} else {
			p.values[f.long] = append(p.values[f.long], v)
		}
		return nil
	}
	looksLikeFlag := func(s string) bool { return len(s) > 1 && strings.HasPrefix(s, "-") }

	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest := args[i+1:]
			if spec.trailing == "" {
				if len(rest) > 0 {
					return fail("unexpected argument '%s' found", rest[0])
				}
				return p, nil
			}
			p.trailing = append([]string{}, rest...)
			i = len(args)
		case a == "--help" || a == "-h":
			p.help = true
			return p, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasEq := strings.Cut(a[2:], "=")
			f, ok := byLong[name]
			if !ok {
				return fail("unexpected argument '--%s' found", name)
			}
			if f.value == "" {
				if hasEq {
					return fail("unexpected value '%s' for '%s' found; no more were expected", val, f.display())
				}
				if err := add(f, "", true); err != nil {
					return nil, err
				}
				continue
			}
			if !hasEq {
				if i+1 >= len(args) || looksLikeFlag(args[i+1]) || args[i+1] == "--" {
					return fail("a value is required for '%s' but none was supplied", f.display())
				}
				i++
				val = args[i]
			}
			if err := add(f, val, false); err != nil {
				return nil, err
			}
		case looksLikeFlag(a):
			// A cluster of short switches ends at the first short option
			// that takes a value; the rest of the word, or the next
			// argument, is that value.
			for j := 1; j < len(a); j++ {
				f, ok := byShort[a[j]]
				if !ok {
					return fail("unexpected argument '-%c' found", a[j])
				}
				if f.value == "" {
					if err := add(f, "", true); err != nil {
						return nil, err
					}
					continue
				}
				val := strings.TrimPrefix(a[j+1:], "=")
				if j+1 >= len(a) {
					if i+1 >= len(args) || looksLikeFlag(args[i+1]) || args[i+1] == "--" {
						return fail("a value is required for '-%c <%s>' but none was supplied", f.short, f.value)
					}
					i++
					val = args[i]
				}
				if err := add(f, val, false); err != nil {
					return nil, err
				}
				break
			}
		default:
			return fail("unexpected argument '%s' found", a)
		}
	}
	for _, r := range spec.required {
		if !p.has(r) {
			return fail("the following required arguments were not provided:\n  %s", byLong[r].display())
		}
	}
	if spec.trailingRequired && len(p.trailing) == 0 {
		return fail("the following required arguments were not provided:\n  <%s>...", spec.trailing)
	}
	return p, nil
}

// knownLong reports whether s is one of spec's long options, with or
// without a value attached.
func (spec cmdSpec) knownLong(s string) bool {
	if !strings.HasPrefix(s, "--") {
		return false
	}
	name, _, _ := strings.Cut(s[2:], "=")
	for _, f := range spec.flags {
		if f.long == name {
			return true
		}
	}
	return false
}
