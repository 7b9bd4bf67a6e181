#!/usr/bin/env bash
# What one `bottlefile tick` costs on the local Docker engine (issue 31),
# over N bottles (default 100): each agent a busybox sleeping, with
# snapshot_policy { every = "24h", keep_last = 2 } and idle { stop_after =
# "24h" } (its use is read every tick; its CPU only once its other
# signals say it went unused for 24h, so never here). It applies them,
# then times
#
#   nothing-due  REPS ticks (default 3) with nothing due: the read-only
#                plan alone (the runtime's list calls and one activity
#                look over every agent: an inspect each, no stats), no
#                lock, no engine change;
#   all-due      one tick after every is set to "1s" in the Bottlefile
#                (every is not recorded: nothing else changes), due for
#                every agent: N snapshots (docker commit) in one plan;
#
# and prints bench/tracesum's summary of one traced tick of each (engine
# calls by kind and phase). Everything carries a run label and the
# lineage, and is removed at the end.
#
#   bench/tick.sh             # 100 bottles
#   N=3 bench/tick.sh         # a quick check on a loaded machine
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
docker=${DOCKER:-docker}
image=bottlefile-bench/busybox:1
n=${N:-100}
reps=${REPS:-3}
work=$(mktemp -d /tmp/bottlefile-tick.XXXXXX)
run=bftick-$$

lineage() { sed -n 's/.*"lineage": *"\([^"]*\)".*/\1/p' <("$work/bottlefile" -chdir="$work/bf" state pull 2>/dev/null) | head -1; }
cleanup() {
  local lin
  lin=$(lineage || true)
  [ -f "$work/bf/.bottlefile/state.db" ] && "$work/bottlefile" -chdir="$work/bf" destroy -auto-approve -include-snapshots >/dev/null 2>&1 || true
  # || true: under set -e its first call, with nothing left after
  # destroy, would end the cleanup before the rm.
  if [ -n "$lin" ]; then bench_remove_lineage "$docker" "$lin" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "tick.sh: $*" >&2; exit 1; }

echo "building bottlefile and bench/tracesum..."
bench_build_bottlefile "$work"
go build -o "$work/tracesum" ./bench/tracesum
bench_busybox_image "$docker" "$image" "$work" || die "cannot make $image"

mkdir -p "$work/bf"
for i in $(seq 1 "$n"); do
  cat >>"$work/bf/Bottlefile" <<HCL
agent "a$i" {
  image   = "$image"
  command = ["sleep", "3600"]
  labels  = { "bench.bottlefile.run" = "$run" }
  snapshot_policy {
    every     = "24h"
    keep_last = 2
  }
  idle {
    stop_after = "24h"
  }
}

HCL
done
bf() { "$work/bottlefile" -chdir="$work/bf" "$@"; }
now() { echo "${EPOCHREALTIME/./}"; } # microseconds

echo "applying $n bottles..."
t0=$(now)
bf apply -auto-approve >"$work/apply.log" 2>&1 || { tail -5 "$work/apply.log"; die "apply failed"; }
echo "  apply: $((($(now) - t0) / 1000)) ms"

traced() { # traced NAME: one traced tick, timed and summarised
  local name=$1 t0 t1
  t0=$(now)
  BOTTLEFILE_LOG=trace bf tick >"$work/out.$name.log" 2>"$work/trace.$name.log" || die "tick failed: $(tail -3 "$work/out.$name.log")"
  t1=$(now)
  echo
  echo "$name tick ($(((t1 - t0) / 1000)) ms): $(grep -E 'Nothing due|Apply complete' "$work/out.$name.log" | head -1)"
  "$work/tracesum" -total "$(((t1 - t0) / 1000))ms" "$work/trace.$name.log" | sed 's/^/  /'
}

echo "nothing due, $reps ticks:"
for r in $(seq 1 "$reps"); do
  t0=$(now)
  bf tick >"$work/out.log" 2>&1 || die "tick failed: $(tail -3 "$work/out.log")"
  grep -q "Nothing due." "$work/out.log" || die "a tick acted with nothing due: $(head -5 "$work/out.log")"
  echo "  $r: $((($(now) - t0) / 1000)) ms"
done
traced nothing-due

sed -i 's/every     = "24h"/every     = "1s"/' "$work/bf/Bottlefile"
traced all-due
grep -q "$n snapshot" "$work/out.all-due.log" || echo "  (the all-due tick did not take $n snapshots: $(grep 'Apply complete' "$work/out.all-due.log"))"
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
