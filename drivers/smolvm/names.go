package smolvm

import (
	"fmt"
	"strings"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
)

// kindMachine is the one kind of object the driver makes.
const kindMachine = "machine"

// maxNameLen is smolvm's limit on machine names.
const maxNameLen = 128

// addrPart turns an object address into the agent-specific part of a
// machine name: "agent.coder" gives "coder"; deeper addresses keep their
// path below the agent, joined by dashes. The address is read with
// addrs.Parse, never cut by hand.
func addrPart(addr string) (string, error) {
	a, err := addrs.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("address %q cannot name a machine: %w", addr, err)
	}
	if a.Agent() == "" {
		return "", fmt.Errorf("address %q is not below %q", addr, "agent")
	}
	return strings.Join(append([]string{a.SafeAgent()}, a.Below()...), "-"), nil
}

// machineName is the smolvm name of an agent's machine:
// bf-<lineage[:8]>-<agent>, checked against smolvm's name rules.
func machineName(lineage, addr string) (string, error) {
	prefix := drivers.LineagePrefix(lineage)
	if prefix == "" {
		return "", fmt.Errorf("no lineage to name %s by", addr)
	}
	part, err := addrPart(addr)
	if err != nil {
		return "", err
	}
	name := "bf-" + prefix + "-" + part
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("%s gives the machine name %q, which smolvm does not accept: %w", addr, name, err)
	}
	return name, nil
}

// checkPlanName checks, before there is a lineage, that an agent will
// give a valid machine name with any lineage. The agent's own name is
// checked as it is: a dot in it would otherwise pass as a path separator.
func checkPlanName(addr, agent string) error {
	part := agent
	if agent == "" || addr != addrs.Agent(agent).String() {
		var err error
		if part, err = addrPart(addr); err != nil {
			return err
		}
	}
	if err := checkName("bf-00000000-" + part); err != nil {
		return fmt.Errorf("the agent name %q cannot name a smolvm machine (bf-<lineage>-%s): %w", strings.TrimPrefix(addr, "agent."), part, err)
	}
	return nil
}

// checkName applies smolvm's rules for machine names (src/data/mod.rs):
// at most 128 characters of [A-Za-z0-9_-], the first a letter or digit,
// no trailing hyphen and no "--".
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the name is empty")
	case len(name) > maxNameLen:
		return fmt.Errorf("it is %d characters long; smolvm allows %d", len(name), maxNameLen)
	case !isAlnum(name[0]):
		return fmt.Errorf("it must start with a letter or digit")
	case strings.HasSuffix(name, "-"):
		return fmt.Errorf("it must not end with '-'")
	case strings.Contains(name, "--"):
		return fmt.Errorf("it must not contain '--'")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' {
			return fmt.Errorf("it contains %q; smolvm allows letters, digits, '-' and '_'", c)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
