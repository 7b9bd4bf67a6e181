#!/usr/bin/env bash
# Enforces the import direction of STYLE.md: each package imports only the
# bottlefile packages below it. Test files are not counted.
set -euo pipefail
mod=$(go list -m)
# Leaves any package may import: they import no bottlefile package.
# addrs spells the object addresses (agent.NAME, snapshot.NAME, ...).
anyone="addrs atomicfile workloadattr"
declare -A allowed=(
  [addrs]=""
  # atomicfile replaces a file atomically and durably (synced file and
  # directory): the one way any package writes a file in place.
  [atomicfile]=""
  # workloadattr is the one table of workload attributes lang and drivers
  # derive from.
  [workloadattr]=""
  # lang reports reference cycles with the one cycle finder, planner/dag's:
  # a leaf, so the direction holds.
  [lang]="egress units planner/dag"
  [units]=""
  [dockersave]=""
  [planner/dag]=""
  # drivers classifies egress rules with the one grammar (capabilities.go).
  [drivers]="egress"
  [state]=""
  # pgtest starts a PostgreSQL server of a test's own.
  [state/pgtest]=""
  [egress]=""
  # engine is how the Docker-engine drivers (docker, swarm) reach an
  # engine: the connection attributes, the dialer, the errors; and how they
  # name what they make on it, the gateway image among them.
  [drivers/engine]="drivers drivers/gateway"
  [drivers/engine/enginetest]=""
  # gateway is the egress gateway every driver that runs one shares: its
  # object, settings and log; it reaches no engine.
  [drivers/gateway]="drivers egress"
  [drivers/docker]="drivers egress dockersave drivers/engine drivers/gateway"
  [drivers/docker/dockertest]="drivers"
  # nsfixture is what the namespaced test fixtures (swarmtest, k8stest)
  # share: a leaf, so neither imports the other's driver.
  [internal/nsfixture]=""
  # swarm drives each engine of the swarm through an engine.Driver that
  # cmd/bottlefile wires in (the docker driver's): never drivers/docker.
  [drivers/swarm]="drivers drivers/engine drivers/gateway egress"
  [drivers/swarm/swarmtest]="drivers drivers/docker/dockertest internal/nsfixture"
  # nodesnap takes snapshots through a Kubernetes node's containerd and
  # pushes images; the kubernetes driver and its fixture both use it.
  [drivers/kubernetes/nodesnap]="drivers"
  # k8stest runs a real single-node Kubernetes for tests.
  [drivers/kubernetes/k8stest]="drivers internal/nsfixture"
  [drivers/smolvm]="drivers egress dockersave"
  # kubernetes drives a cluster through its API server (client-go); the
  # gateway is drivers/gateway's, its names and limits drivers/engine's.
  [drivers/kubernetes]="drivers drivers/engine drivers/gateway drivers/kubernetes/nodesnap egress"
  [drivers/smolvm/fakesmolvm]=""
  [drivers/smolvm/smolvmtest]=""
  [drivers/drivertest]="drivers planner/dag"
  # policy reads the operator's egress policy in the egress rule grammar.
  [policy]="egress"
  # planner bounds runtimes by the policy, in the egress rule grammar.
  [planner]="lang planner/dag drivers state units egress policy"
  [executor]="planner planner/dag drivers lang state"
  [operations]="executor planner planner/dag lang drivers state dockersave egress policy"
  # Commands parse flags, call operations and render: never drivers or
  # state, which operations opens and configures for them.
  [cmd/bottlefile/command]="operations executor planner planner/dag lang units"
  [cmd/bottlefile]="cmd/bottlefile/command drivers drivers/docker drivers/kubernetes drivers/smolvm drivers/swarm egress"
  # The gateway alone: egress and nothing else, to stay small.
  [cmd/bottlefile-gateway]="egress"
)
# No driver imports another: what two drivers share lives in a package of
# its own (these), and cmd/bottlefile wires one driver into another. The
# test kits (dockertest, swarmtest) are not drivers.
shared="drivers/engine drivers/gateway drivers/drivertest"
driverOf() { # the driver a package drivers/NAME[/...] belongs to, or ""
  case "$1" in drivers/*) ;; *) return ;; esac
  local d
  d=$(echo "$1" | cut -d/ -f1-2)
  for s in $shared; do [ "$d" = "$s" ] && return; done
  echo "$d"
}
status=0
for pkg in $(go list ./... | sed "s#^$mod/\{0,1\}##"); do
  [ -n "$pkg" ] || continue
  case "$pkg" in bench*|examples*) continue ;; esac
  if [ -z "${allowed[$pkg]+set}" ]; then
    echo "import check: package $pkg has no rule in scripts/check-imports.sh" >&2
    status=1
    continue
  fi
  for dep in $(go list -f '{{join .Imports "\n"}}' "./$pkg" | grep "^$mod/" | sed "s#^$mod/##"); do
    case "$pkg" in drivers/*/*) ;; *)
      from=$(driverOf "$pkg") to=$(driverOf "$dep")
      if [ -n "$from" ] && [ -n "$to" ] && [ "$from" != "$to" ]; then
        echo "import check: driver $pkg may not import another driver's package $dep: move what they share into a package of its own, and wire the driver in from cmd/bottlefile" >&2
        status=1
        continue
      fi ;;
    esac
    ok=0
    for a in ${allowed[$pkg]} $anyone; do [ "$dep" = "$a" ] && ok=1; done
    if [ $ok -eq 0 ]; then
      echo "import check: $pkg may not import $dep" >&2
      status=1
    fi
  done
done
exit $status
