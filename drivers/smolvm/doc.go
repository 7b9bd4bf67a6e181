// Package smolvm drives smolvm (github.com/smol-machines/smolvm): each
// agent runs as one libkrun microVM, made and managed by shelling out to
// the smolvm CLI, version 1.8.0 or later.
//
// A runtime block names the driver and, optionally, the binary:
//
//	runtime "vm" {
//	  driver = "smolvm"
//	  binary = "/opt/smolvm/bin/smolvm" # default: smolvm on PATH
//	}
//
// Configure finds the binary and runs smolvm --version; it changes
// nothing. Read is one "machine ls --json" call, filtered by the lineage
// label, and one listing of the lineage's snapshots directory. Apply uses the documented argument forms
// only: the machine name is always --name (never positional, and exec has
// no -n), the workload follows "--", and delete always passes -f, because
// without it smolvm asks on stdin.
//
// Plan never calls the CLI, and rejects what smolvm cannot do before
// anything runs: sidecars (bottlefile cannot give the agent access to a
// second machine by name), build blocks, user, egress rules it cannot
// enforce (as a *drivers.RuleError, so the diagnostic points at the rule),
// and credential blocks: smolvm has no gateway that could inject them, and
// the key is never handed to the machine instead.
//
// One object per agent: agent.NAME, kind "machine", named
// bf-<lineage[:8]>-<NAME> and labelled io.bottlefile.lineage, .address and
// .config-hash. Its attributes are the agent's image, command, entrypoint,
// env, workdir, cpus, memory and labels. Every change replaces the machine:
// smolvm's "machine update" needs a stopped machine and cannot change the
// image, the workload or the labels, so nothing is updated in place yet.
//
// How agent settings map onto "smolvm machine create":
//
//   - image: --image REF for a registry reference or a docker-save tar
//     (a relative path is taken from the Bottlefile's directory), or
//     --from PATH for a path ending in .smolmachine.
//   - command and entrypoint: smolvm has no entrypoint flag, and the
//     arguments after "--" replace the image's ENTRYPOINT and CMD
//     together. The workload is therefore entrypoint followed by command;
//     an image's own ENTRYPOINT is not prefixed to a command given alone.
//     With neither, the image's ENTRYPOINT and CMD run.
//   - env: -e KEY=VALUE, except that sensitive values are passed as -e KEY
//     with the value in the smolvm process's environment, so that they
//     never appear on a command line (ps) or in a log.
//   - workdir: -w DIR. user is not supported (smolvm has no user flag).
//   - cpus: --cpus N, whole vCPUs from 1 to 255. memory is given in bytes
//     and passed as --mem in MiB, rounded up.
//   - labels: --label KEY=VALUE, beside bottlefile's own three.
//   - build blocks are docker-only for now (its Declaration says so).
//   - egress: no egress block means no network, so --net is never passed.
//     Allow rules, in the gateway's grammar (package egress), map to
//     --allow-host for a name and --allow-cidr for an address or block;
//     per-port and wildcard rules, and blocks reaching the host's loopback
//     or link-local addresses, are errors naming the rule.
//     A name rule allows every port of that host: smolvm cannot narrow it
//     to 80 and 443 as the docker gateway does.
//
// After create, Apply starts the machine (smolvm pulls the image at
// start) and checks it answers "machine exec --name N -- true", retrying
// for a bounded time. A machine that fails to start or to answer is
// deleted again, so nothing unrecorded is left behind.
//
// Snapshots (kind "snapshot", planned by the core) are .smolmachine packs
// kept under the state directory, .bottlefile/snapshots/<lineage[:8]>/
// <address>-<n>.smolmachine, with a small JSON record beside each (lineage,
// address, config hash, runtime) that Read lists with one directory
// listing. Taking one stops the agent's machine, runs "pack create
// --from-vm NAME -o PATH", and starts it again (with the readiness
// check) if it was running. Its id and Snapshot.Image are the pack's path
// relative to the Bottlefile's directory ("./.bottlefile/..."), so a
// checkout that moves keeps them. Deleting one removes the pack, its stub
// and its record, and never a file outside snapshots/.
//
// A workload create with ApplyRequest.BootImage (resume, migration) boots
// from the snapshot instead of the image: "--from PACK.smolmachine" or, for
// a docker-save tar, "--image PATH.tar", with the agent's own settings and
// egress flags on the command line (packs carry no allowlist; create
// --from honours the flags since 1.8.0). smolvm reads a machine's source
// file at every start, so the machine (this one, or one whose image is
// snapshot.X.image) boots from a hard link of its own,
// .bottlefile/boot/<lineage[:8]>/<machine>.smolmachine (or .tar), removed
// with the machine: pruning the snapshot does not break a machine that
// resumed from it.
//
// ImportSnapshot (drivers.SnapshotImporter, migration from docker) writes
// the docker-save stream to one .tar under snapshots/, checks it has a
// manifest.json, and records it like a pack. There is no ExportSnapshot:
// smolvm cannot turn a machine or a pack into a docker-save tar.
package smolvm
