package main

import (
	"github.com/hashicorp/cli"

	"github.com/bottlefile/bottlefile/cmd/bottlefile/command"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/docker"
	"github.com/bottlefile/bottlefile/drivers/smolvm"
)

// PrimaryCommands are listed first in help.
var PrimaryCommands = []string{"validate", "plan", "apply", "destroy"}

// Commands maps each command name to its factory.
func Commands(meta *command.Meta) map[string]cli.CommandFactory {
	return map[string]cli.CommandFactory{
		"validate":   func() (cli.Command, error) { return &command.ValidateCommand{Meta: meta}, nil },
		"plan":       func() (cli.Command, error) { return &command.PlanCommand{Meta: meta}, nil },
		"apply":      func() (cli.Command, error) { return &command.ApplyCommand{Meta: meta}, nil },
		"destroy":    func() (cli.Command, error) { return &command.ApplyCommand{Meta: meta, Destroy: true}, nil },
		"version":    func() (cli.Command, error) { return &command.VersionCommand{Meta: meta}, nil },
		"fmt":        func() (cli.Command, error) { return &command.FmtCommand{Meta: meta}, nil },
		"show":       func() (cli.Command, error) { return &command.ShowCommand{Meta: meta}, nil },
		"graph":      func() (cli.Command, error) { return &command.GraphCommand{Meta: meta}, nil },
		"output":     func() (cli.Command, error) { return &command.OutputCommand{Meta: meta}, nil },
		"state":      func() (cli.Command, error) { return &command.StateCommand{Meta: meta}, nil },
		"state list": func() (cli.Command, error) { return &command.StateListCommand{Meta: meta}, nil },
		"state show": func() (cli.Command, error) { return &command.StateShowCommand{Meta: meta}, nil },
		"state rm":   func() (cli.Command, error) { return &command.StateRmCommand{Meta: meta}, nil },
		"state pull": func() (cli.Command, error) { return &command.StatePullCommand{Meta: meta}, nil },
		"logs":       func() (cli.Command, error) { return &command.LogsCommand{Meta: meta}, nil },
		"gateway":    func() (cli.Command, error) { return &GatewayCommand{Meta: meta}, nil },
		"snapshot":   func() (cli.Command, error) { return &command.SnapshotCommand{Meta: meta}, nil },
		"snapshot export": func() (cli.Command, error) {
			return &command.SnapshotExportCommand{Meta: meta}, nil
		},
		"snapshot import": func() (cli.Command, error) {
			return &command.SnapshotImportCommand{Meta: meta}, nil
		},
	}
}

// registry lists the concrete drivers: main is their only importer.
func registry() drivers.Registry {
	return drivers.Registry{
		"docker": docker.New,
		"smolvm": smolvm.New,
	}
}
