package command

import "github.com/hashicorp/cli"

// Commands maps each command name to its factory. main adds the hidden
// gateway command, which is not the CLI's to run.
func Commands(meta *Meta) map[string]cli.CommandFactory {
	cmd := func(c cli.Command) cli.CommandFactory {
		return func() (cli.Command, error) { return c, nil }
	}
	return map[string]cli.CommandFactory{
		"validate":        cmd(&ValidateCommand{Meta: meta}),
		"plan":            cmd(&PlanCommand{Meta: meta}),
		"apply":           cmd(&ApplyCommand{Meta: meta}),
		"destroy":         cmd(&ApplyCommand{Meta: meta, Destroy: true}),
		"version":         cmd(&VersionCommand{Meta: meta}),
		"policy":          cmd(&PolicyCommand{Meta: meta}),
		"fmt":             cmd(&FmtCommand{Meta: meta}),
		"show":            cmd(&ShowCommand{Meta: meta}),
		"graph":           cmd(&GraphCommand{Meta: meta}),
		"output":          cmd(&OutputCommand{Meta: meta}),
		"state":           cmd(&StateCommand{Meta: meta}),
		"state list":      cmd(&StateListCommand{Meta: meta}),
		"state show":      cmd(&StateShowCommand{Meta: meta}),
		"state rm":        cmd(&StateRmCommand{Meta: meta}),
		"state mv":        cmd(&StateMvCommand{Meta: meta}),
		"state pull":      cmd(&StatePullCommand{Meta: meta}),
		"logs":            cmd(&LogsCommand{Meta: meta}),
		"status":          cmd(&StatusCommand{Meta: meta}),
		"ps":              cmd(aliasCommand{Command: &StatusCommand{Meta: meta}, of: "status"}),
		"stop":            cmd(&LifecycleCommand{Meta: meta, Verb: "stop"}),
		"start":           cmd(&LifecycleCommand{Meta: meta, Verb: "start"}),
		"restart":         cmd(&LifecycleCommand{Meta: meta, Verb: "restart"}),
		"archive":         cmd(&LifecycleCommand{Meta: meta, Verb: "archive"}),
		"exec":            cmd(&ExecCommand{Meta: meta}),
		"tick":            cmd(&TickCommand{Meta: meta}),
		"watch":           cmd(&WatchCommand{Meta: meta}),
		"egress":          cmd(&EgressCommand{Meta: meta}),
		"egress denials":  cmd(&EgressDenialsCommand{Meta: meta}),
		"snapshot":        cmd(&SnapshotCommand{Meta: meta}),
		"snapshot export": cmd(&SnapshotExportCommand{Meta: meta}),
		"snapshot import": cmd(&SnapshotImportCommand{Meta: meta}),
		"snapshot list":   cmd(&SnapshotListCommand{Meta: meta}),
		"snapshot take":   cmd(&SnapshotTakeCommand{Meta: meta}),
		"snapshot rm":     cmd(&SnapshotRmCommand{Meta: meta}),

		// Recovering a damaged or moved state (state/backup.go).
		"state relocate":       cmd(&StateRelocateCommand{Meta: meta}),
		"state restore-backup": cmd(&StateRestoreBackupCommand{Meta: meta}),
		// Where the state is kept (a backend block, state/pg.go).
		"state push":    cmd(&StatePushCommand{Meta: meta}),
		"state migrate": cmd(&StateMigrateCommand{Meta: meta}),
	}
}
