#!/usr/bin/env bash
# Fault loop for snapshots (issue 11): CYCLES cycles (default 30) of
#
#   apply    agents come up (after the first cycle: resumed from the
#            snapshot the last destroy kept);
#   change   a command change forces a replace of every agent, each
#            preceded by a policy snapshot;
#   destroy  every agent goes, each preceded by a policy snapshot, which
#            is kept;
#
# on AGENTS agents (default 5), each with an egress allowlist (so a
# gateway) and snapshot_policy { before = ["replace", "destroy"] }, at
# bottlefile's default parallelism unless PARALLELISM is set. It counts
# the phases that failed (exit code not 0) and, separately, the work that
# was lost: after every apply each agent appends a line to
# /workspace/work.txt, and after the next apply or change the file must
# hold every line written so far. It also checks that the plan after each
# apply says "No changes.".
#
# Usage: bench/snapshot-cycles.sh
#   env: CYCLES=30 AGENTS=5 PARALLELISM= (empty: the default)
#        BOTTLEFILE=path (default: built here) IMAGE=ref (default: imported
#        from the static busybox) WORK=dir (default: a temporary one)
#        DOCKER=docker LOGDIR=dir (keeps the output of each failed phase)
#        SIDECARS=0 (sidecars per agent: more deletes, more sweeps)
#        BUILD=0 (1: the agents' image is built from a local context)
#
# The last line is machine-readable:
#   RESULT cycles=N phases=P failed=F lost=L not_converged=C purge=ok|failed seconds=S
# and the exit status is 0 only when F, L and C are all 0 and the final
# destroy -include-snapshots (not counted in P) exits 0 and leaves nothing
# carrying the lineage.
#
# It talks only to the local engine and to containers it started (the
# allowlisted hosts are never contacted). On exit it runs destroy
# -include-snapshots, then removes whatever still carries its state's
# lineage label.
set -uo pipefail

cycles=${CYCLES:-30}
agents=${AGENTS:-5}
parallelism=${PARALLELISM:-}
docker=${DOCKER:-docker}
image=${IMAGE:-bottlefile-bench/busybox:1}
sidecars=${SIDECARS:-0}
build=${BUILD:-0}

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
tmp=$(mktemp -d /tmp/bottlefile-snapcycles.XXXXXX)
work=${WORK:-$tmp/bottle}
mkdir -p "$work"
bf=${BOTTLEFILE:-}

die() { echo "snapshot-cycles.sh: $*" >&2; exit 1; }

lineage() { "$bf" -chdir="$work" state pull 2>/dev/null | sed -n 's/.*"lineage": *"\([^"]*\)".*/\1/p' | head -1; }

cleanup() {
  local l
  l=$(lineage)
  if [ "${purge:-}" != ok ] && [ -n "$bf" ] && [ -f "$work/.bottlefile/state.db" ]; then
    if ! "$bf" -chdir="$work" destroy -include-snapshots -auto-approve >"$tmp/cleanup.log" 2>&1; then
      echo "cleanup: destroy -include-snapshots failed; removing by label. Its output ends:" >&2
      tail -12 "$tmp/cleanup.log" | sed 's/^/    | /' >&2
    fi
  fi
  if [ -n "$l" ]; then
    bench_remove_lineage "$docker" "$l"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "$bf" ]; then
  echo "building bottlefile..."
  (cd "$here" && bench_build_bottlefile "$tmp") || die "build failed"
  bf=$tmp/bottlefile
fi

# The image is imported from a rootfs of the static busybox: no registry.
bench_busybox_image "$docker" "$image" "$tmp" || die "cannot make $image"

if [ "$build" = 1 ]; then
  mkdir -p "$work/agent"
  printf 'FROM %s\nCOPY motd /etc/motd\n' "$image" >"$work/agent/Dockerfile"
  echo "built by bench/snapshot-cycles.sh" >"$work/agent/motd"
  source_line='build {
    context = "./agent"
  }'
else
  source_line="image   = \"$image\""
fi

# config GEN: the Bottlefile, every agent's command depending on GEN.
config() {
  local gen=$1 i j
  for ((i = 1; i <= agents; i++)); do
    echo "agent \"a$i\" {"
    for ((j = 1; j <= sidecars; j++)); do
      printf '  sidecar "s%d" {\n    image   = "%s"\n    command = ["sleep", "100000"]\n  }\n\n' "$j" "$image"
    done
    cat <<EOF
  $source_line
  command = ["sleep", "$((100000 + gen))"]
  workdir = "/workspace"

  egress {
    allow = ["api.anthropic.com:443", "github.com:443"]
  }

  snapshot_policy {
    before    = ["replace", "destroy"]
    keep_last = 3
  }
}

EOF
  done
}

par_flag=()
[ -n "$parallelism" ] && par_flag=("-parallelism=$parallelism")

phases=0 failed=0 lost=0 checks=0 notconv=0
declare -A failed_by=() errors=() want=()
for ((i = 1; i <= agents; i++)); do want[a$i]=""; done
lines=0

# normalize: an error line with ids, numbers and names made generic, so
# that equal failures count together.
normalize() {
  sed -E 's/sha256:[0-9a-f]+/sha256:<id>/g; s/\b[0-9a-f]{12,64}\b/<id>/g; s/bf-[0-9a-f]{8}/bf-<lineage>/g; s/\.a[0-9]+/.aN/g; s/agent\.a[0-9]+/agent.aN/g; s/snapshot\.[0-9]+/snapshot.N/g; s/snap:[0-9]+/snap:N/g; s/[0-9]+(\.[0-9]+)?(ms|s)\b/<t>/g'
}

# phase NAME CMD...: runs bottlefile, counts a failure and its error.
phase() {
  local name=$1 rc out
  shift
  phases=$((phases + 1))
  out=$tmp/phase.out
  "$bf" -chdir="$work" "$@" "${par_flag[@]}" >"$out" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    failed_by[$name]=$((${failed_by[$name]:-0} + 1))
    echo "  cycle $cycle $name: FAILED (exit $rc)"
    grep -E '^(Error|  failed|  not started)|^[a-z].*(rror|No such|not on the engine|has no container|unrecognized)' "$out" | head -8 | sed 's/^/    | /'
    local e
    # the first line of each error's detail, as the CLI prints it
    while IFS= read -r e; do
      e=$(printf '%s' "$e" | normalize)
      errors[$e]=$((${errors[$e]:-0} + 1))
    done < <(awk '/^Error: /{inerr=1; detail=""; next}
      inerr && /^$/ {if (detail != "") {print detail; inerr=0}; next}
      inerr {sub(/^ +/, ""); detail = detail (detail == "" ? "" : " ") $0}
      END {if (inerr && detail != "") print detail}' "$out")
    [ -n "${LOGDIR:-}" ] && cp "$out" "$LOGDIR/snapcycles-$cycle-$name.log"
  fi
  return $rc
}

# checkwork: each agent must hold every line written so far; then each
# writes one more.
checkwork() {
  local what=$1 i a id got
  lines=$((lines + 1))
  for ((i = 1; i <= agents; i++)); do
    a=a$i
    checks=$((checks + 1))
    id=$($docker ps -q --filter "label=io.bottlefile.lineage=$lin" --filter "label=io.bottlefile.address=agent.$a" --filter status=running)
    if [ -z "$id" ] || [ "$(echo "$id" | wc -l)" -ne 1 ]; then
      lost=$((lost + 1))
      echo "  cycle $cycle $what: agent.$a has no running container"
      continue
    fi
    got=$($docker exec "$id" sh -c 'cat /workspace/work.txt 2>/dev/null')
    if [ "$got" != "${want[$a]%$'\n'}" ]; then
      lost=$((lost + 1))
      echo "  cycle $cycle $what: agent.$a lost work: has $(printf '%s' "$got" | grep -c .) lines, want $(printf '%s' "${want[$a]}" | grep -c .)"
      want[$a]="$got"$'\n' # go on from what it has
      [ -z "$got" ] && want[$a]=""
    fi
    $docker exec "$id" sh -c "echo '$a line $lines' >> /workspace/work.txt" >/dev/null
    want[$a]+="$a line $lines"$'\n'
  done
}

converged() {
  local what=$1
  "$bf" -chdir="$work" plan -detailed-exitcode >"$tmp/plan.out" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    notconv=$((notconv + 1))
    echo "  cycle $cycle $what: the plan after it is not empty (exit $rc):"
    grep -E '^  # |^Plan:|^Error' "$tmp/plan.out" | head -6 | sed 's/^/    | /'
  fi
}

echo "snapshot-cycles: $cycles cycles of apply/change/destroy, $agents agents with egress and snapshot_policy ($sidecars sidecars each, built: $build), parallelism ${parallelism:-default} in $work"
start=$(date +%s)
lin=""
for ((cycle = 1; cycle <= cycles; cycle++)); do
  t0=$(date +%s)
  config 0 >"$work/Bottlefile"
  if phase apply apply -auto-approve; then
    [ -n "$lin" ] || lin=$(lineage)
    converged apply
  fi
  [ -n "$lin" ] || lin=$(lineage)
  checkwork apply
  config "$cycle" >"$work/Bottlefile"
  phase change apply -auto-approve && converged change
  checkwork change
  phase destroy destroy -auto-approve
  echo "cycle $cycle: $(($(date +%s) - t0)) s; failed so far $failed of $phases phases, lost work $lost of $checks checks, not converged $notconv"
done
secs=$(($(date +%s) - start))

# At the end destroy -include-snapshots must remove every snapshot too and
# leave nothing carrying the lineage.
purge=ok
cycle=end
if ! phase purge destroy -include-snapshots -auto-approve; then
  purge=failed
  failed=$((failed - 1))
fi
phases=$((phases - 1)) # the purge is reported on its own
if [ -n "$lin" ]; then
  left=$( ($docker ps -aq --filter "label=io.bottlefile.lineage=$lin"; $docker network ls -q --filter "label=io.bottlefile.lineage=$lin"; $docker image ls -aq --filter "label=io.bottlefile.lineage=$lin") | wc -l)
  if [ "$left" -ne 0 ]; then
    echo "  destroy -include-snapshots left $left objects carrying lineage $lin"
    purge=failed
  fi
fi

echo
echo "phases failed: $failed of $phases (apply ${failed_by[apply]:-0}, change ${failed_by[change]:-0}, destroy ${failed_by[destroy]:-0}) at parallelism ${parallelism:-default}"
echo "work lost: $lost of $checks checks; plans not empty after an apply: $notconv"
echo "destroy -include-snapshots at the end: $purge"
echo "time: $secs s (the loop)"
if [ ${#errors[@]} -gt 0 ]; then
  echo "errors (normalized), by count:"
  for e in "${!errors[@]}"; do echo "${errors[$e]} $e"; done | sort -rn | sed 's/^/  /'
fi
echo "RESULT cycles=$cycles phases=$phases failed=$failed lost=$lost not_converged=$notconv purge=$purge seconds=$secs"
[ "$failed" -eq 0 ] && [ "$lost" -eq 0 ] && [ "$notconv" -eq 0 ] && [ "$purge" = ok ]
