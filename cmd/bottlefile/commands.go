package main

import (
	"github.com/hashicorp/cli"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
)

// PrimaryCommands are listed first in help.
var PrimaryCommands = []string{"validate", "plan", "apply", "destroy"}

// Commands maps each command name to its factory.
func Commands(meta *command.Meta) map[string]cli.CommandFactory {
	return map[string]cli.CommandFactory{
		"validate": func() (cli.Command, error) { return &command.ValidateCommand{Meta: meta}, nil },
		"plan":     func() (cli.Command, error) { return &command.PlanCommand{Meta: meta}, nil },
		"apply":    func() (cli.Command, error) { return &command.ApplyCommand{Meta: meta}, nil },
		"destroy":  func() (cli.Command, error) { return &command.ApplyCommand{Meta: meta, Destroy: true}, nil },
		"version":  func() (cli.Command, error) { return &command.VersionCommand{Meta: meta}, nil },
	}
}

// registry lists the concrete drivers: main is their only importer.
func registry() drivers.Registry {
	return drivers.Registry{
		"docker": docker.New,
	}
}
