#!/usr/bin/env bash
# What one bottle costs on the local Docker engine (issue 28), each step
# against the docker CLI doing the same engine work in the same round:
#
#   first start  bottlefile apply of one agent with an egress allowlist, in a
#                fresh directory, until the agent runs (and has been
#                watched, -wait), against docker network create of the
#                egress and the bottle networks, docker run of the agent,
#                and docker create + network connect + start of a proxy
#                container (the gateway's place);
#   (untimed)    the agent writes SIZE_MB (default 1024) MiB of random bytes
#                to /blob, both sides;
#   snapshot     bottlefile snapshot take agent.a, against docker commit;
#   destroy      bottlefile destroy of the agent, whose snapshot_policy has
#                before = ["destroy"] (so a commit first), against docker
#                commit + docker rm -f (agent, proxy) + docker network rm
#                (both networks);
#   resume       bottlefile apply again, which boots the agent from the
#                snapshot the destroy kept, against the first start's
#                calls with the committed image; and, alone, docker run of
#                the committed image on an existing network ("run only").
#
# Each round does the bottlefile side then the CLI side of every step,
# interleaved (REPS rounds, default 5, after WARMUP=1 warm-up round);
# medians, ratios and paired ratios are printed at the end with every
# sample and the load average at the start and end. TRACE=1 also runs one
# traced first start, snapshot, destroy and resume (BOTTLEFILE_LOG=trace)
# and prints bench/tracesum's summary of each.
#
# Usage: bench/one-bottle.sh   (env: REPS=5 WARMUP=1 SIZE_MB=1024 TRACE=0 DOCKER=docker BOTTLEFILE=path)
set -euo pipefail

reps=${REPS:-5}
warmup=${WARMUP:-1}
size_mb=${SIZE_MB:-1024}
trace=${TRACE:-0}
docker=${DOCKER:-docker}
image=bottlefile-bench/busybox:1

cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d /tmp/bottlefile-one.XXXXXX)
run=bfone-$$
label="bench.bottlefile.run=$run"

cleanup() {
  [ -f "$work/bf/.bottlefile/state.db" ] && "$work/bottlefile" -chdir="$work/bf" destroy -auto-approve -include-snapshots >/dev/null 2>&1 || true
  cli_clean >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "one-bottle.sh: $*" >&2; exit 1; }

echo "building bottlefile and bench/tracesum..."
bench_build_bottlefile "$work"
go build -o "$work/tracesum" ./bench/tracesum

# The image is imported from a rootfs of the static busybox: no registry.
bench_busybox_image "$docker" "$image" "$work" || die "cannot make $image"

now() { echo "${EPOCHREALTIME/./}"; } # microseconds
measure() { # measure NAME CMD...: appends CMD's wall time (µs) to NAME
  local name=$1 t0
  shift
  t0=$(now)
  "$@"
  echo $(($(now) - t0)) >>"$work/times.$name"
}

# --- bottlefile: one agent with an egress allowlist and a policy snapshot
# before destroy.
mkdir -p "$work/bf"
cat >"$work/bf/Bottlefile" <<HCL
agent "a" {
  image   = "$image"
  command = ["sleep", "3600"]
  labels  = { "bench.bottlefile.run" = "$run" }
  egress {
    allow = ["github.com:443"]
  }
  snapshot_policy {
    before = ["destroy"]
  }
}
HCL
bf() { "$work/bottlefile" -chdir="$work/bf" "$@" >"$work/bf/out.log" 2>"$work/bf/err.log" || { cat "$work/bf/out.log" "$work/bf/err.log" >&2; die "bottlefile $* failed"; }; }
# WAIT=0s passes -wait=0s: the same engine work without the watch of the
# agent after its start (250 ms by default), as real-engine.sh's WAIT.
bf_apply() { bf apply -auto-approve ${WAIT:+-wait=$WAIT}; }
bf_snapshot() { bf snapshot take agent.a; }
bf_destroy() { bf destroy -auto-approve; }
bf_container() { $docker ps -q --filter "label=$label" --filter "label=io.bottlefile.address=agent.a"; }
bf_clean() { bf destroy -auto-approve -include-snapshots; rm -rf "$work/bf/.bottlefile"; }
bf_traced() { # bf_traced NAME COMMAND...: one traced bottlefile COMMAND, summarised
  local name=$1 t0 t1
  shift
  t0=$(now)
  BOTTLEFILE_LOG=trace "$work/bottlefile" -chdir="$work/bf" "$@" >"$work/bf/out.log" 2>"$work/trace.$name.log" || die "traced $* failed: $(tail -3 "$work/trace.$name.log")"
  t1=$(now)
  echo
  echo "trace of the $name ($(((t1 - t0) / 1000)) ms):"
  "$work/tracesum" -total "$(((t1 - t0) / 1000))ms" "$work/trace.$name.log" | sed 's/^/  /'
}

# --- docker CLI: the same objects by hand
cli_nets() {
  $docker network create --subnet 10.222.0.0/24 --label "$label" "$run-egress" >/dev/null &&
    $docker network create --internal --subnet 10.223.0.0/28 -o com.docker.network.bridge.inhibit_ipv4=true --label "$label" "$run-n" >/dev/null
}
cli_proxy() {
  $docker create --init --network "$run-n" --dns-option timeout:1 --dns-option attempts:1 --label "$label" --name "$run-g" "$image" sleep 3600 >/dev/null &&
    $docker network connect "$run-egress" "$run-g" && $docker start "$run-g" >/dev/null
}
cli_start() { # cli_start IMAGE
  cli_nets &&
    $docker run -d --init --network "$run-n" --dns-option timeout:1 --dns-option attempts:1 --label "$label" --name "$run-c" "$1" sleep 3600 >/dev/null &&
    cli_proxy
}
cli_first() { cli_start "$image"; }
cli_snapshot() { $docker commit "$run-c" "$run-snap:1" >/dev/null; }
cli_destroy() {
  $docker commit "$run-c" "$run-snap:2" >/dev/null &&
    $docker rm -f "$run-c" "$run-g" >/dev/null &&
    $docker network rm "$run-n" "$run-egress" >/dev/null
}
cli_resume() { cli_start "$run-snap:2"; }
cli_run_only() { $docker run -d --init --network "$run-n" --label "$label" --name "$run-r" "$run-snap:2" sleep 3600 >/dev/null; }
cli_clean() {
  $docker rm -f $($docker ps -aq --filter "label=$label") >/dev/null 2>&1 || true
  $docker network rm $($docker network ls -q --filter "label=$label") >/dev/null 2>&1 || true
  $docker image rm "$run-snap:1" "$run-snap:2" >/dev/null 2>&1 || true
}

fill() { # fill CONTAINER: SIZE_MB MiB of random bytes, untimed
  $docker exec "$1" dd if=/dev/urandom of=/blob bs=1048576 count="$size_mb" 2>/dev/null || die "could not write $size_mb MiB in $1"
}

round() {
  measure bf_first bf_apply
  measure cli_first cli_first
  fill "$(bf_container)"
  fill "$run-c"
  measure bf_snapshot bf_snapshot
  measure cli_snapshot cli_snapshot
  measure bf_destroy bf_destroy
  measure cli_destroy cli_destroy
  measure bf_resume bf_apply
  measure cli_resume cli_resume
  measure cli_run_only cli_run_only
  $docker exec "$(bf_container)" test -s /blob || die "the resumed agent lacks what it wrote"
  bf_clean
  cli_clean
}

echo "$(date -u +%Y-%m-%dT%H:%MZ) engine: $($docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}}, storage {{.Server.Os}})' 2>/dev/null) $($docker info --format '{{.Driver}}'), $(nproc) CPUs, load at the start $(cut -d' ' -f1-3 /proc/loadavg), $size_mb MiB written"
if ((warmup)); then
  echo "warm-up round..."
  round
  rm -f "$work"/times.*
fi
for ((r = 1; r <= reps; r++)); do
  echo "round $r of $reps..."
  round
done

median() { sort -n "$work/times.$1" | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.3f", m / 1e6}'; }
samples() { awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e6}' "$work/times.$1"; }
paired() { paste "$work/times.$1" "$work/times.$2" | awk '{print $1 / $2}' | sort -g | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f", m}'; }
row() { # row LABEL BF BASE BASELINE-NAME
  local b c
  b=$(median "$2")
  c=$(median "$3")
  printf '%-24s %8ss %8ss %7s %7s   %-6s %s\n' "$1" "$b" "$c" "$(awk -v b="$b" -v c="$c" 'BEGIN {printf "%.2f", b / c}')" "$(paired "$2" "$3")" "<= 1.1" "$4"
}
echo
echo "one agent with egress, $size_mb MiB written; medians of $reps rounds (seconds); ratio = bottlefile / baseline of the medians; paired = median of the rounds' ratios"
printf '%-24s %9s %9s %7s %7s   %-6s %s\n' "" bottlefile baseline ratio paired target baseline
row "first start" bf_first cli_first "docker network create x2 + docker run -d + proxy (create, network connect, start)"
row "snapshot ($size_mb MiB)" bf_snapshot cli_snapshot "docker commit"
row "destroy (policy)" bf_destroy cli_destroy "docker commit + docker rm -f (agent, proxy) + docker network rm x2"
row "resume" bf_resume cli_resume "the first start's calls with the committed image"
printf '%-24s %9s %8ss\n' "  docker run only" "" "$(median cli_run_only)"
echo "samples (seconds):"
for n in bf_first cli_first bf_snapshot cli_snapshot bf_destroy cli_destroy bf_resume cli_resume cli_run_only; do
  printf '  %-13s %s\n' "$n" "$(samples "$n")"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

if ((trace)); then
  bf_traced "first start" apply -auto-approve
  fill "$(bf_container)"
  bf_traced "snapshot" snapshot take agent.a
  bf_traced "destroy" destroy -auto-approve
  bf_traced "resume" apply -auto-approve
  bf_clean
fi
