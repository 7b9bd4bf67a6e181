package command

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/cli"
	"github.com/hashicorp/hcl/v2"

	"github.com/bottlefile/bottlefile/operations"
)

// UnknownCommand answers a command line whose command is not registered
// (bottlefile frobnicate, bottlefile snapshot frob): it says so, with the
// closest command when one is close, and returns exit code 1 and true. It
// returns false for a command line the CLI is to run: one naming a
// command, or none (bottlefile alone, -help, -version). commands are the
// registered ones; hidden ones run but are never suggested.
func UnknownCommand(m *Meta, commands map[string]cli.CommandFactory, hidden []string, args []string) (int, bool) {
	words := commandWords(args)
	if len(words) == 0 {
		return 0, false
	}
	// The longest registered command the words begin with, as the CLI
	// finds it.
	parent := ""
	for i := len(words); i > 0; i-- {
		if name := strings.Join(words[:i], " "); commands[name] != nil {
			parent = name
			break
		}
	}
	var given string
	switch {
	case parent == "":
		given = words[0]
	case parent == strings.Join(words, " ") || !hasSubcommands(commands, parent):
		return 0, false // a command, maybe with arguments
	default:
		given = parent + " " + words[strings.Count(parent, " ")+1]
	}
	// The word is compared with the last words of the commands beside it.
	prefix := ""
	if parent != "" {
		prefix = parent + " "
	}
	var siblings []string
	for name := range commands {
		word, ok := strings.CutPrefix(name, prefix)
		if ok && !strings.Contains(word, " ") && !slices.Contains(hidden, name) {
			siblings = append(siblings, word)
		}
	}
	detail := fmt.Sprintf("bottlefile has no command %q.", given)
	if s := suggestCommand(strings.TrimPrefix(given, prefix), siblings); s != "" {
		detail += fmt.Sprintf(" Did you mean %q?", prefix+s)
	}
	if parent == "" {
		detail += ` "bottlefile -help" lists the commands.`
	} else {
		detail += fmt.Sprintf(" \"bottlefile %s -help\" lists its subcommands.", parent)
	}
	m.showDiags(nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: fmt.Sprintf("Unknown command %q", given), Detail: detail}})
	return 1, true
}

// commandWords are the words of args that name a command, as the CLI
// reads them: from the first that is not a flag, up to the next flag, an
// empty one or one with a space.
func commandWords(args []string) []string {
	var words []string
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "" || strings.HasPrefix(a, "-") || strings.Contains(a, " ") {
			if len(words) > 0 {
				break
			}
			if !strings.HasPrefix(a, "-") {
				break
			}
			continue // a flag before the command (-help, -version)
		}
		words = append(words, a)
	}
	return words
}

func hasSubcommands(commands map[string]cli.CommandFactory, parent string) bool {
	for name := range commands {
		if strings.HasPrefix(name, parent+" ") {
			return true
		}
	}
	return false
}

// suggestCommand is the command among names closest to given: the one
// with the same letters in another order (stauts is status, not state),
// else as an address is suggested (a few edits, or another case), else the
// only one given begins. "" when none is close.
func suggestCommand(given string, names []string) string {
	slices.Sort(names)
	for _, n := range names {
		if sameLetters(n, given) {
			return n
		}
	}
	if s := operations.SuggestAddress(given, names); s != "" {
		return s
	}
	var prefixed []string
	for _, n := range names {
		if strings.HasPrefix(n, given) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

func sameLetters(a, b string) bool {
	ra, rb := []rune(a), []rune(b)
	slices.Sort(ra)
	slices.Sort(rb)
	return slices.Equal(ra, rb)
}
