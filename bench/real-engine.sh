#!/usr/bin/env bash
# Times bottlefile on the local Docker engine (see bench/README.md), in two
# cases (MODES, default "noegress egress"):
#   - noegress: agents without an egress block: a bottle is a network and a
#     container, and has no gateway;
#   - egress: agents with an egress allowlist: each bottle also has a
#     gateway container (on the agent's network, connected to one egress
#     network per runtime), and the baselines make the same.
# In each case:
#   - apply, a no-op plan and destroy of AGENTS agents (default 10), each
#     against the same work done by docker CLI calls run 10 at a time;
#   - apply of AGENTS_RAW agents (default 20) against bench/rawapi, a
#     program making the same networks and containers straight through the
#     engine API at the same parallelism (10); RAW=0 skips it.
# Each is repeated REPS times (default 5), interleaved, after one warm-up
# round (WARMUP=0 skips it); medians and ratios are printed at the end.
# WAIT=DUR passes -wait=DUR to apply: by default apply watches what it
# started for 250 ms, a flat cost at the end that the baselines do not pay;
# WAIT=0s compares the same engine work alone.
# TRACE=1 ends with one traced apply and destroy of AGENTS agents per case
# (BOTTLEFILE_LOG=trace) and bench/tracesum's summary of where its time
# went.
#
# Usage: bench/real-engine.sh            (env: REPS=5 AGENTS=10 AGENTS_RAW=20 MODES="noegress egress" DOCKER=docker TRACE=0)
#        MODES=egress AGENTS=100 REPS=1 RAW=0 bench/real-engine.sh   (the 100-bottle comparison)
set -euo pipefail

reps=${REPS:-5}
agents=${AGENTS:-10}
agents_raw=${AGENTS_RAW:-20}
modes=${MODES:-noegress egress}
raw=${RAW:-1}
warmup=${WARMUP:-1}
GATEWAYS=0
parallel=10
docker=${DOCKER:-docker}
image=bottlefile-bench/busybox:1

cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d /tmp/bottlefile-bench.XXXXXX)
run=bfbench-$$
label="bench.bottlefile.run=$run"

cleanup() {
  local d
  for d in "$work"/bf-*; do
    [ -f "$d/.bottlefile/state.db" ] && "$work/bottlefile" -chdir="$d" destroy -auto-approve >/dev/null 2>&1 || true
  done
  [ -x "$work/rawapi" ] && "$work/rawapi" -destroy -label "$label" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

die() { echo "real-engine.sh: $*" >&2; exit 1; }

echo "building bottlefile, bench/rawapi and bench/tracesum..."
bench_build_bottlefile "$work"
go build -o "$work/rawapi" ./bench/rawapi
go build -o "$work/tracesum" ./bench/tracesum

# The image is imported from a rootfs of the static busybox: no registry.
bench_busybox_image "$docker" "$image" "$work" || die "cannot make $image"

now() { echo "${EPOCHREALTIME/./}"; } # microseconds

# measure NAME CMD...: runs CMD and appends its wall time (µs) to NAME.
measure() {
  local name=$1 t0
  shift
  t0=$(now)
  "$@"
  echo $(($(now) - t0)) >>"$work/times.$name"
}

# par FUNC N: runs FUNC 0 .. FUNC N-1 in the background, $parallel at a
# time, and fails if any failed. Each FUNC makes its docker calls one after
# another, so at most $parallel docker calls run at once.
par() {
  local f=$1 n=$2 i pid failed=0 pids=()
  for ((i = 0; i < n; i++)); do
    "$f" "$i" &
    pids+=($!)
    if ((${#pids[@]} == parallel)); then
      for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
      pids=()
    fi
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return $failed
}

# --- bottlefile
bottlefile_dir() { # bottlefile_dir NAME N: a fresh directory with N agents (with egress allowlists when GATEWAYS=1)
  local dir=$work/bf-$1 i egress=""
  rm -rf "$dir"
  mkdir -p "$dir"
  ((GATEWAYS)) && egress='  egress {\n    allow = ["github.com:443", "*.pypi.org:443"]\n  }\n'
  for ((i = 0; i < $2; i++)); do
    printf 'agent "a%d" {\n  image   = "%s"\n  command = ["sleep", "600"]\n  labels  = { "bench.bottlefile.run" = "%s" }\n'"$egress"'}\n\n' "$i" "$image" "$run"
  done >"$dir/Bottlefile"
  echo "$dir"
}
bf() { "$work/bottlefile" -chdir="$1" "${@:2}" >"$1/out.log" 2>&1 || { cat "$1/out.log" >&2; die "bottlefile ${*:2} failed"; }; }
bf_apply() { bf "$1" apply -auto-approve ${WAIT:+-wait=$WAIT}; }
bf_plan() { bf "$1" plan && grep -q "No changes." "$1/out.log" || die "the plan after apply is not empty: $(cat "$1/out.log")"; }
bf_destroy() { bf "$1" destroy -auto-approve; }

# --- docker CLI: the same objects bottlefile makes, by hand
subnet() { echo "10.219.$(($1 / 16)).$((($1 % 16) * 16))/28"; }
cli_run() { # cli_run NAME NETWORK
  $docker run -d --init --network "$2" --dns-option timeout:1 --dns-option attempts:1 \
    --label "$label" --name "$1" "$image" sleep 600 >/dev/null
}
cli_gateway() { # what a gateway costs: a container on the agent's network, connected to the egress network
  $docker create --init --network "$run-n$1" --dns-option timeout:1 --dns-option attempts:1 \
    --label "$label" --name "$run-g$1" "$image" sleep 600 >/dev/null &&
    $docker network connect "$run-egress" "$run-g$1" && $docker start "$run-g$1" >/dev/null
}
cli_create() {
  $docker network create --internal --subnet "$(subnet "$1")" -o com.docker.network.bridge.inhibit_ipv4=true \
    --label "$label" "$run-n$1" >/dev/null || return 1
  cli_run "$run-c$1" "$run-n$1" || return 1
  if ((GATEWAYS)); then cli_gateway "$1"; fi
}
cli_inspect() {
  $docker network inspect "$run-n$1" >/dev/null && $docker container inspect "$run-c$1" >/dev/null &&
    { ((!GATEWAYS)) || $docker container inspect "$run-g$1" >/dev/null; }
}
cli_destroy() {
  $docker rm -f "$run-c$1" >/dev/null || return 1
  if ((GATEWAYS)); then $docker rm -f "$run-g$1" >/dev/null || return 1; fi
  $docker network rm "$run-n$1" >/dev/null
}
cli_apply_all() {
  if ((GATEWAYS)); then $docker network create --subnet 10.221.0.0/24 --label "$label" "$run-egress" >/dev/null || return 1; fi
  par cli_create "$agents"
}
cli_plan_all() {
  if ((GATEWAYS)); then $docker network inspect "$run-egress" >/dev/null || return 1; fi
  par cli_inspect "$agents"
}
cli_destroy_all() {
  par cli_destroy "$agents" || return 1
  ((GATEWAYS)) || return 0
  # After 100 gateways, the engine can still hold an endpoint of one it
  # reported removed ("has active endpoints"): try again, as a person would.
  local try
  for try in 1 2 3 4 5 6 7 8 9 10; do
    $docker network rm "$run-egress" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  $docker network rm "$run-egress" >/dev/null
}

raw_flags() { ((GATEWAYS)) && echo -gateways; }
raw_apply() { "$work/rawapi" -n "$agents_raw" -parallelism "$parallel" -image "$image" -label "$label" -prefix "$run-raw" -subnet 10.220.0.0/16 $(raw_flags) 2>/dev/null; }
raw_destroy() { "$work/rawapi" -destroy -label "$label" 2>/dev/null; }

round() { # round NAME-SUFFIX: one of everything, in the mode GATEWAYS says
  local dir m=$mode
  dir=$(bottlefile_dir "small$1" "$agents")
  measure "bf_apply.$m" bf_apply "$dir"
  measure "bf_plan.$m" bf_plan "$dir"
  measure "bf_destroy.$m" bf_destroy "$dir"
  measure "cli_apply.$m" cli_apply_all
  measure "cli_plan.$m" cli_plan_all
  measure "cli_destroy.$m" cli_destroy_all
  if ((raw)); then
    dir=$(bottlefile_dir "large$1" "$agents_raw")
    measure "bf_apply20.$m" bf_apply "$dir"
    bf_destroy "$dir"
    measure "raw_apply20.$m" raw_apply
    raw_destroy
  fi
}
set_mode() {
  case $1 in
  noegress) GATEWAYS=0 ;;
  egress) GATEWAYS=1 ;;
  *) die "unknown mode $1 (MODES is noegress and/or egress)" ;;
  esac
  mode=$1
}

echo "$(date -u +%Y-%m-%dT%H:%MZ) engine: $($docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if ((warmup)); then
  echo "warm-up round..."
  for m in $modes; do
    set_mode "$m"
    round warmup
  done
  rm -f "$work"/times.*
fi
for ((r = 1; r <= reps; r++)); do
  for m in $modes; do
    echo "round $r of $reps, $m..."
    set_mode "$m"
    round "$r"
  done
done

median() { sort -n "$work/times.$1" | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.3f", m / 1e6}'; }
samples() { awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e6}' "$work/times.$1"; }
# paired A B: the median over rounds of A's time / B's time in that round.
paired() { paste "$work/times.$1" "$work/times.$2" | awk '{print $1 / $2}' | sort -g | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f", m}'; }
row() { # row LABEL BF BASE TARGET BASELINE-NAME
  local b c
  b=$(median "$2")
  c=$(median "$3")
  printf '%-30s %8ss %8ss %7s %7s   %-7s %s\n' "$1" "$b" "$c" "$(awk -v b="$b" -v c="$c" 'BEGIN {printf "%.2f", b / c}')" "$(paired "$2" "$3")" "$4" "$5"
}

for m in $modes; do
  set_mode "$m"
  echo
  if ((GATEWAYS)); then
    echo "$m: agents with an egress allowlist; the baselines make a gateway too (a container per agent, connected to one egress network)"
  else
    echo "$m: agents without an egress block (no gateway); the baselines make a network and a container per agent"
  fi
  echo "medians of $reps rounds (seconds); ratio = bottlefile / baseline of the medians; paired = median of the rounds' ratios"
  printf '%-30s %9s %9s %7s %7s   %-7s %s\n' "" bottlefile baseline ratio paired target baseline
  gw=""
  ((GATEWAYS)) && gw=" (+ gateways)"
  row "apply, $agents agents" "bf_apply.$m" "cli_apply.$m" "<= 1.1" "docker network create + docker run -d$gw, $parallel at a time"
  row "no-op plan, $agents agents" "bf_plan.$m" "cli_plan.$m" "<= 0.25" "docker network inspect + docker container inspect$gw, $parallel at a time"
  row "destroy, $agents agents" "bf_destroy.$m" "cli_destroy.$m" "<= 1.1" "docker rm -f + docker network rm$gw, $parallel at a time"
  ((raw)) && row "apply, $agents_raw agents" "bf_apply20.$m" "raw_apply20.$m" "<= 1.3" "bench/rawapi$gw, parallelism $parallel"
  echo "samples (seconds):"
  for n in bf_apply cli_apply bf_plan cli_plan bf_destroy cli_destroy bf_apply20 raw_apply20; do
    [ -f "$work/times.$n.$m" ] && printf '  %-12s %s\n' "$n" "$(samples "$n.$m")"
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

if ((${TRACE:-0})); then
  for m in $modes; do
    set_mode "$m"
    dir=$(bottlefile_dir "trace-$m" "$agents")
    t0=$(now)
    BOTTLEFILE_LOG=trace "$work/bottlefile" -chdir="$dir" apply -auto-approve ${WAIT:+-wait=$WAIT} >"$dir/out.log" 2>"$dir/trace.log" || die "traced apply failed: $(tail -5 "$dir/trace.log")"
    t1=$(now)
    echo
    echo "$m: where a traced apply of $agents agents went ($(((t1 - t0) / 1000)) ms, load $(cut -d' ' -f1 /proc/loadavg)):"
    "$work/tracesum" -total "$(((t1 - t0) / 1000))ms" "$dir/trace.log" | sed 's/^/  /'
    t0=$(now)
    BOTTLEFILE_LOG=trace "$work/bottlefile" -chdir="$dir" destroy -auto-approve >"$dir/out.log" 2>"$dir/trace-destroy.log" || die "traced destroy failed: $(tail -5 "$dir/trace-destroy.log")"
    t1=$(now)
    echo
    echo "$m: where a traced destroy of $agents agents went ($(((t1 - t0) / 1000)) ms):"
    "$work/tracesum" -total "$(((t1 - t0) / 1000))ms" "$dir/trace-destroy.log" | sed 's/^/  /'
  done
fi
