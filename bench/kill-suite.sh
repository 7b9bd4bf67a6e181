#!/usr/bin/env bash
# Kill suite (issue 26): KILLS SIGKILLs of bottlefile (default 30: a third
# each of apply, snapshot-taking replace and destroy), each at a random
# moment of its command, and each trial followed by exactly one plain command:
# the same command again, without the kill. The bottles are AGENTS agents
# (default 2) built from a local context, each with SIDECARS sidecars
# (default 1), an egress allowlist (so a gateway), a sensitive variable in
# its env, and snapshot_policy { before = ["replace", "destroy"] }.
#
# One round is three trials, in this order:
#
#   apply    from nothing live (the agents boot from the snapshot the last
#            destroy kept); killed, then `apply` once;
#   replace  a command change replaces every agent, each after a policy
#            snapshot; killed, then `apply` once;
#   destroy  every bottle goes, each agent after a policy snapshot;
#            killed, then `destroy` once.
#
# Before each trial every agent appends a line to /workspace/work.txt. A
# trial converged when its one plain command exits 0 and the plan after it
# (`plan`, or `plan -destroy` after a destroy) says "No changes.". After
# each trial it counts
#
#   untracked  containers, networks and images carrying the state's lineage
#              label whose id the state does not record (an image that a
#              recorded container runs is accounted for by it);
#   lost       agents whose file lacks a line written before the kill: in
#              the live agent after apply and replace, in the agent's
#              newest snapshot after destroy.
#
# The kill moment is uniform in [0, T) where T is how long the same
# command took in the warm-up round (unkilled), so kills land in every
# phase of it: planning, snapshots, creates, deletes. A command that
# finished before its kill is counted apart (it was not killed).
#
# Usage: bench/kill-suite.sh
#   env: KILLS=30 AGENTS=2 SIDECARS=1 SEED=$RANDOM DOCKER=docker
#        BOTTLEFILE=path (default: built here) IMAGE=ref (default: imported
#        from the static busybox) LOGDIR=dir (keeps the output of failed
#        trials) TIMEOUT=120 (seconds any one command may take)
#        WINDOW=100 (the kill moment's range, in percent of the warm-up
#        time: lower it when the machine got quieter since the warm-up and
#        commands finish before their kill)
#
# The last line is machine-readable:
#   RESULT kills=K trials=N converged=C untracked=U lost=L seconds=S
# (K trials were killed; the others finished before their kill) and the
# exit status is 0 only when C = N and U = L = 0.
#
# It talks only to the local engine and to containers it started (the
# allowlisted hosts are never contacted). On exit it runs destroy
# -include-snapshots, then removes whatever still carries its lineage.
set -uo pipefail

kills=${KILLS:-30}
agents=${AGENTS:-2}
sidecars=${SIDECARS:-1}
docker=${DOCKER:-docker}
image=${IMAGE:-bottlefile-bench/busybox:1}
timeout=${TIMEOUT:-120}
seed=${SEED:-$RANDOM}
window=${WINDOW:-100}
RANDOM=$seed

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
tmp=$(mktemp -d /tmp/bottlefile-killsuite.XXXXXX)
work=$tmp/bottle
mkdir -p "$work"
bf=${BOTTLEFILE:-}
export BOTTLEFILE_VAR_token=kill-suite-secret-value

die() { echo "kill-suite.sh: $*" >&2; exit 1; }

lineage() { "$bf" -chdir="$work" state pull 2>/dev/null | jq -r '.lineage // empty'; }

cleanup() {
  local l
  l=$(lineage)
  if [ -n "$bf" ] && [ -f "$work/.bottlefile/state.db" ]; then
    if ! timeout "$timeout" "$bf" -chdir="$work" destroy -include-snapshots -auto-approve >"$tmp/cleanup.log" 2>&1; then
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
trap 'exit 130' INT TERM

if [ -z "$bf" ]; then
  echo "building bottlefile..."
  (cd "$here" && bench_build_bottlefile "$tmp") || die "build failed"
  bf=$tmp/bottlefile
fi

# The image is imported from a rootfs of the static busybox: no registry.
bench_busybox_image "$docker" "$image" "$tmp" || die "cannot make $image"

mkdir -p "$work/agent"
printf 'FROM %s\nCOPY motd /etc/motd\n' "$image" >"$work/agent/Dockerfile"
echo "built by bench/kill-suite.sh" >"$work/agent/motd"

# config GEN: the Bottlefile; every agent's command depends on GEN.
config() {
  local gen=$1 i j
  cat <<EOF
variable "token" {
  type      = string
  sensitive = true
}

EOF
  for ((i = 1; i <= agents; i++)); do
    echo "agent \"a$i\" {"
    for ((j = 1; j <= sidecars; j++)); do
      printf '  sidecar "s%d" {\n    image   = "%s"\n    command = ["sleep", "100000"]\n  }\n\n' "$j" "$image"
    done
    cat <<EOF
  build {
    context = "./agent"
  }
  command = ["sleep", "$((100000 + gen))"]
  workdir = "/workspace"
  env     = { API_TOKEN = var.token }

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

# run NAME CMD...: one bottlefile command, bounded in time; its output is
# kept in $tmp/NAME.out.
run() {
  local name=$1
  shift
  timeout "$timeout" "$bf" -chdir="$work" "$@" >"$tmp/$name.out" 2>&1
}

# killed AFTER_MS CMD...: starts bottlefile and sends it SIGKILL after
# AFTER_MS milliseconds (if it is still running).
killed() {
  local after=$1
  shift
  "$bf" -chdir="$work" "$@" >"$tmp/killed.out" 2>&1 &
  local pid=$!
  sleep "$(printf '%d.%03d' $((after / 1000)) $((after % 1000)))"
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
  fi
  wait "$pid" 2>/dev/null
  return 1 # it finished before the kill
}

ms() { date +%s%3N; }

# untracked: the lineage's containers, networks and images whose id the
# state does not record; an image a recorded container runs, and the
# parents of that one or of a recorded image (the layers it is made on, which
# go with it), are accounted for. Prints one line per object.
untracked() {
  local f="label=io.bottlefile.lineage=$lin" ids ctr img
  ids=$("$bf" -chdir="$work" state pull 2>/dev/null | jq -r '.objects[].id' | sed 's/^sha256://')
  declare -A rec=() used=()
  for id in $ids; do rec[$id]=1; done
  for ctr in $($docker ps -aq --no-trunc --filter "$f"); do
    [ -n "${rec[$ctr]:-}" ] || echo "container $ctr $($docker inspect -f '{{.Name}} {{.State.Status}} {{index .Config.Labels "io.bottlefile.address"}}' "$ctr" 2>/dev/null)"
    [ -n "${rec[$ctr]:-}" ] && used[$($docker inspect -f '{{.Image}}' "$ctr" 2>/dev/null | sed 's/^sha256://')]=1
  done
  for img in "${!rec[@]}" "${!used[@]}"; do
    while img=$($docker image inspect -f '{{.Parent}}' "$img" 2>/dev/null | sed 's/^sha256://') && [ -n "$img" ]; do
      used[$img]=1
    done
  done
  for n in $($docker network ls -q --no-trunc --filter "$f"); do
    [ -n "${rec[$n]:-}" ] || echo "network $n $($docker network inspect -f '{{.Name}}' "$n" 2>/dev/null)"
  done
  for i in $($docker image ls -aq --no-trunc --filter "$f" | sed 's/^sha256://' | sort -u); do
    [ -n "${rec[$i]:-}" ] || [ -n "${used[$i]:-}" ] || echo "image $i $($docker image inspect -f '{{.RepoTags}} {{index .Config.Labels "io.bottlefile.address"}}' "$i" 2>/dev/null)"
  done
}

# write: every running agent appends one line; want[] keeps what each
# must hold.
declare -A want=()
lines=0
write() {
  local i a id
  lines=$((lines + 1))
  for ((i = 1; i <= agents; i++)); do
    a=a$i
    id=$($docker ps -q --filter "label=io.bottlefile.lineage=$lin" --filter "label=io.bottlefile.address=agent.$a" --filter status=running | head -1)
    [ -n "$id" ] || continue
    if $docker exec "$id" sh -c "echo '$a line $lines' >> /workspace/work.txt" >/dev/null 2>&1; then
      want[$a]+="$a line $lines"$'\n'
    fi
  done
}

# lostin WHERE: counts the agents whose file lacks a line written so far,
# read from the live agent (WHERE=live, when it runs) or its newest
# snapshot image.
lostin() {
  local where=$1 i a id got ref n=0
  for ((i = 1; i <= agents; i++)); do
    a=a$i
    [ -n "${want[$a]:-}" ] || continue
    id=""
    if [ "$where" = live ]; then
      id=$($docker ps -q --filter "label=io.bottlefile.lineage=$lin" --filter "label=io.bottlefile.address=agent.$a" --filter status=running | head -1)
    fi
    if [ -n "$id" ]; then
      got=$($docker exec "$id" sh -c 'cat /workspace/work.txt 2>/dev/null')
    else
      # Not running (a plain command that failed): the files are lost only
      # if its newest snapshot lacks them too.
      ref=$($docker image inspect --format '{{.Created}}|{{range .RepoTags}}{{.}} {{end}}' \
        $($docker image ls -q --filter "label=io.bottlefile.lineage=$lin" --filter "label=io.bottlefile.snapshot-of=agent.$a" | sort -u) 2>/dev/null |
        grep -v '|$' | sort -r | head -1 | cut -d'|' -f2 | awk '{print $1}')
      # Labels emptied, so the check's container is none of the lineage's.
      got=$([ -n "$ref" ] && $docker run --rm --network none --label io.bottlefile.lineage= --label io.bottlefile.address= \
        --entrypoint /bin/sh "$ref" -c 'cat /workspace/work.txt 2>/dev/null')
    fi
    if [ "$got" != "${want[$a]%$'\n'}" ]; then
      n=$((n + 1))
      echo "    agent.$a ($where) has $(printf '%s' "$got" | grep -c .) lines, want $(printf '%s' "${want[$a]}" | grep -c .)"
      want[$a]=$([ -n "$got" ] && printf '%s\n' "$got") # go on from what it has
      [ -n "${want[$a]}" ] && want[$a]+=$'\n'
    fi
  done
  return $n
}

converged=0 untracked_total=0 lost_total=0 trials=0
declare -A conv_by=() kills_by=() trials_by=() early=()
gen=0

# trial KIND: one kill and one plain command, then the counts.
trial() {
  local kind=$1 plain=(apply -auto-approve) check=(plan -detailed-exitcode) where=live
  local after ok=1 left
  case $kind in
  replace) gen=$((gen + 1)); config "$gen" >"$work/Bottlefile" ;;
  destroy) plain=(destroy -auto-approve); check=(plan -destroy -detailed-exitcode); where=snapshot ;;
  esac
  write
  trials=$((trials + 1))
  trials_by[$kind]=$((${trials_by[$kind]:-0} + 1))
  after=$((RANDOM * 32768 + RANDOM))
  after=$((after % (${dur[$kind]} * window / 100 + 1)))
  local how="killed at $after ms"
  if killed "$after" "${plain[@]}"; then
    kills_by[$kind]=$((${kills_by[$kind]:-0} + 1))
  else
    early[$kind]=$((${early[$kind]:-0} + 1))
    how="finished before its kill at $after ms"
  fi
  if ! run plain "${plain[@]}"; then
    ok=0
    echo "  trial $trials $kind ($how): the plain ${plain[0]} failed:"
    grep -E '^Error|^  |rror' "$tmp/plain.out" | head -8 | sed 's/^/    | /'
  elif ! run check "${check[@]}"; then
    ok=0
    echo "  trial $trials $kind ($how): the ${check[*]} after it is not empty:"
    grep -E '^  # |^Plan:|^Error|because' "$tmp/check.out" | head -8 | sed 's/^/    | /'
  fi
  if [ "$ok" = 1 ]; then
    converged=$((converged + 1))
    conv_by[$kind]=$((${conv_by[$kind]:-0} + 1))
  elif [ -n "${LOGDIR:-}" ]; then
    cp "$tmp/killed.out" "$LOGDIR/kill-$trials-$kind-killed.log"
    cp "$tmp/plain.out" "$LOGDIR/kill-$trials-$kind-plain.log"
    cp "$tmp/check.out" "$LOGDIR/kill-$trials-$kind-check.log" 2>/dev/null
  fi
  left=$(untracked)
  if [ -n "$left" ]; then
    untracked_total=$((untracked_total + $(echo "$left" | wc -l)))
    echo "  trial $trials $kind ($how): untracked after it:"
    echo "$left" | sed 's/^/    | /'
  fi
  lostin "$where"
  lost_total=$((lost_total + $?))
  echo "trial $trials $kind: $how of ~${dur[$kind]}; converged $converged of $trials, untracked $untracked_total, lost $lost_total"
}

echo "kill-suite: $kills kills, $agents built agents with $sidecars sidecars, egress, a sensitive variable and a policy snapshot before replace and destroy; seed $seed, window $window%; in $work"
start=$(date +%s)

# Warm-up round, not killed: how long each command takes. The apply is
# timed resuming from snapshots, as every apply of the loop does (the first
# one also builds the image).
declare -A dur=()
config 0 >"$work/Bottlefile"
run warm apply -auto-approve || { cat "$tmp/warm.out"; die "the warm-up apply failed"; }
lin=$(lineage)
[ -n "$lin" ] || die "no lineage after the first apply"
write
gen=1
config "$gen" >"$work/Bottlefile"
t=$(ms); run warm apply -auto-approve || { cat "$tmp/warm.out"; die "the warm-up replace failed"; }
dur[replace]=$(($(ms) - t))
write
t=$(ms); run warm destroy -auto-approve || { cat "$tmp/warm.out"; die "the warm-up destroy failed"; }
dur[destroy]=$(($(ms) - t))
t=$(ms); run warm apply -auto-approve || { cat "$tmp/warm.out"; die "the warm-up resume failed"; }
dur[apply]=$(($(ms) - t))
write
run warm destroy -auto-approve || { cat "$tmp/warm.out"; die "the second warm-up destroy failed"; }
echo "warm-up: apply ${dur[apply]} ms, replace ${dur[replace]} ms, destroy ${dur[destroy]} ms"

# Rounds of apply, replace, destroy until each command was killed (not
# finished before its kill) KILLS/3 times; at most 3 x KILLS trials.
kinds=(apply replace destroy)
per=$(((kills + 2) / 3))
short() {
  local kind
  for kind in "${kinds[@]}"; do [ "${kills_by[$kind]:-0}" -lt "$per" ] && return 0; done
  return 1
}
while short && [ "$trials" -lt $((kills * 3)) ]; do
  for kind in "${kinds[@]}"; do trial "$kind"; done
done
secs=$(($(date +%s) - start))
killed_total=$((${kills_by[apply]:-0} + ${kills_by[replace]:-0} + ${kills_by[destroy]:-0}))

echo
for kind in "${kinds[@]}"; do
  echo "$kind: ${kills_by[$kind]:-0} killed, ${early[$kind]:-0} finished before their kill; ${conv_by[$kind]:-0} of ${trials_by[$kind]:-0} converged in one plain run"
done
echo "untracked objects: $untracked_total; files lost: $lost_total; time: $secs s"
echo "RESULT kills=$killed_total trials=$trials converged=$converged untracked=$untracked_total lost=$lost_total seconds=$secs"
[ "$converged" -eq "$trials" ] && [ "$untracked_total" -eq 0 ] && [ "$lost_total" -eq 0 ]
