package command

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeCommands are the bottlefile command lines of a README's sh blocks,
// continuation lines joined and comments cut.
func readmeCommands(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inSh, line := false, ""
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "```sh"):
			inSh = true
			continue
		case strings.HasPrefix(l, "```"):
			inSh = false
			continue
		case !inSh:
			continue
		}
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		line += strings.TrimSpace(l)
		if strings.HasSuffix(line, `\`) {
			line = strings.TrimSuffix(line, `\`) + " "
			continue
		}
		if strings.Contains(line, "bottlefile -chdir=") {
			out = append(out, line)
		}
		line = ""
	}
	return out
}

var readmeVar = regexp.MustCompile(`-var[ =]([A-Za-z_][A-Za-z0-9_]*)=`)

// TestExampleREADMEsPassTheSameVariables: in each example's README, every
// bottlefile command that opens the configuration passes the same -var
// names as the others: one that leaves a variable out uses its default
// (another engine, another registry) without saying so. And what a README
// must tell is told: the swarm one names node_hosts (exec and snapshots
// on the other nodes) and registry_url.
func TestExampleREADMEsPassTheSameVariables(t *testing.T) {
	readmes, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	mentions := map[string][]string{"swarm": {"node_hosts", "registry_url"}}
	checked := 0
	for _, path := range readmes {
		name := filepath.Base(filepath.Dir(path))
		var all []string
		names := map[string][]string{}
		for _, line := range readmeCommands(t, path) {
			if regexp.MustCompile(`bottlefile -chdir=\S+ (validate|fmt|version)\b`).MatchString(line) {
				continue // these need no variable values
			}
			var vars []string
			for _, m := range readmeVar.FindAllStringSubmatch(line, -1) {
				vars = append(vars, m[1])
			}
			slices.Sort(vars)
			names[line] = vars
			all = append(all, vars...)
			checked++
		}
		slices.Sort(all)
		all = slices.Compact(all)
		for line, vars := range names {
			if !slices.Equal(vars, all) {
				t.Errorf("%s: %q passes -var %v, the README's other commands %v", path, line, vars, all)
			}
		}
		data, _ := os.ReadFile(path)
		for _, word := range mentions[name] {
			if !strings.Contains(string(data), word) {
				t.Errorf("%s never mentions %s", path, word)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no README command was checked")
	}
}
