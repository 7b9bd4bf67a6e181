package main

import (
	"github.com/hashicorp/cli"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/kubernetes"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
	"github.com/bottlefile/bottlefile/drivers/swarm"
)

// PrimaryCommands are listed first in help.
var PrimaryCommands = []string{"validate", "plan", "apply", "destroy"}

// Commands maps each command name to its factory: the command package's,
// and the hidden gateway.
func Commands(meta *command.Meta) map[string]cli.CommandFactory {
	cmds := command.Commands(meta)
	cmds["gateway"] = func() (cli.Command, error) { return &GatewayCommand{Meta: meta}, nil }
	return cmds
}

// registry lists the concrete drivers: main is their only importer. The
// swarm driver reaches each engine of the swarm through the docker
// driver, wired here so that neither driver imports the other.
func registry() drivers.Registry {
	return drivers.Registry{
		"docker":     docker.New,
		"kubernetes": kubernetes.New,
		"smolvm":     smolvm.New,
		"swarm":      swarm.Factory(docker.NewEngine),
	}
}
