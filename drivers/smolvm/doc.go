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
// nothing. Plan never calls the CLI. Read is one "machine ls --json" call,
// filtered by the lineage label. Apply uses the documented argument forms
// only: the machine name is always --name (never positional, and exec has
// no -n), the workload follows "--", and delete always passes -f, because
// without it smolvm asks on stdin.
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
//   - build blocks are docker-only for now.
//   - egress: no egress block means no network, so --net is never passed.
//     Allow rules, in the gateway's grammar (package egress), map to
//     --allow-host for a name and --allow-cidr for an address or block;
//     per-port and wildcard rules, and blocks reaching the host's loopback
//     or link-local addresses, are errors naming the rule.
//     A name rule allows every port of that host: smolvm cannot narrow it
//     to 80 and 443 as the docker gateway does. Apply reads the allowlist
//     from the "egress" attribute; Plan will set it once the agent spec
//     carries one.
//
// After create, Apply starts the machine (smolvm pulls the image at
// start) and checks it answers "machine exec --name N -- true", retrying
// for a bounded time. A machine that fails to start or to answer is
// deleted again, so nothing unrecorded is left behind.
package smolvm
