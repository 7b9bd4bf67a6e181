#!/usr/bin/env bash
# early-exit.sh: how soon the failures apply's watch exists for (-wait,
# operations.DefaultWait) show on this engine. For each kind, N containers
# are started as bottlefile starts a workload (docker run -d --init: tini
# as pid 1), and for each it takes, relative to the engine's
# State.StartedAt (what the watch counts from):
#
#   - seen: the engine's "die" event, sent once the exit is recorded, so
#     from then on an inspect shows it (the watch's look must come after);
#   - exit: State.FinishedAt, the exit as containerd saw it. It can come
#     before StartedAt: the engine sets StartedAt after the task started,
#     and a command that is not there exits before that.
#
#   bench/early-exit.sh            # N=20 DOCKER=docker
#
# With APPLY=1 it then applies one agent of each kind N times at each of
# WAITS (default "0s 100ms 250ms") with bottlefile (built here, or
# BOTTLEFILE=path) and counts the applies that failed naming the exit
# code: what the watch caught, end to end. Each state is destroyed after.
#
# It prints, per kind, the exit code and the minimum, median, 95th
# percentile and maximum of each, in milliseconds, and the load average
# at the start and the end. Everything it makes carries the label
# bench.bottlefile.run=bfbench-PID and is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

N=${N:-20}
DOCKER=${DOCKER:-docker}
IMAGE=bottlefile-bench/busybox:1
RUN=bfbench-$$
LABEL=bench.bottlefile.run=$RUN
TMP=$(mktemp -d)
EVENTS=

cleanup() {
  [ -z "$EVENTS" ] || kill "$EVENTS" 2>/dev/null || true
  for d in "$TMP"/apply-*; do
    [ -f "$d/.bottlefile/state.db" ] && "$TMP/bottlefile" -chdir="$d" destroy -auto-approve >/dev/null 2>&1 || true
  done
  $DOCKER rm -f $($DOCKER ps -aq --filter "label=$LABEL") >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT

bench_busybox_image "$DOCKER" "$IMAGE" "$TMP"

# start KIND: docker run of one container of that kind; prints its id.
start() {
  local run=("$DOCKER" run -d --init --label "$LABEL")
  case $1 in
  missing-command) "${run[@]}" "$IMAGE" no-such-binary ;;
  shell-exit-3) "${run[@]}" "$IMAGE" sh -c 'exit 3' ;;
  entrypoint-first-line) # a shell entrypoint whose first check fails
    "${run[@]}" --entrypoint /bin/sh "$IMAGE" -c \
      'test -f /etc/app.conf || { echo "missing /etc/app.conf" >&2; exit 1; }; exec sleep 600' ;;
  esac
}
kinds=(missing-command shell-exit-3 entrypoint-first-line)

ns() { date -u -d "$1" +%s%N; } # RFC 3339 -> ns since the epoch (GNU date)

# stats FILE: min median p95 max of one number a line
stats() {
  sort -n "$1" >"$1.sorted"
  local n
  n=$(wc -l <"$1.sorted")
  printf '%s %s %s %s\n' "$(sed -n 1p "$1.sorted")" "$(sed -n "$(((n + 1) / 2))p" "$1.sorted")" \
    "$(sed -n "$(((n * 95 + 99) / 100))p" "$1.sorted")" "$(sed -n "${n}p" "$1.sorted")"
}

$DOCKER events --filter "label=$LABEL" --filter event=die --format '{{.Actor.ID}} {{.TimeNano}}' >"$TMP/events" &
EVENTS=$!
sleep 1

echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %4s %3s | %-25s | %-25s\n' "" "" "" "seen - StartedAt, ms" "exit - StartedAt, ms"
printf '%-22s %4s %3s | %5s %6s %5s %6s | %5s %6s %5s %6s\n' kind code n min median p95 max min median p95 max
for name in "${kinds[@]}"; do
  : >"$TMP/$name.seen"
  : >"$TMP/$name.exit"
  code=
  for _ in $(seq "$N"); do
    id=$(start "$name")
    $DOCKER wait "$id" >/dev/null
    read -r started finished code < <($DOCKER inspect -f '{{.State.StartedAt}} {{.State.FinishedAt}} {{.State.ExitCode}}' "$id")
    s=$(ns "$started")
    for _ in 1 2 3 4 5 6 7 8 9 10; do # the event can trail docker wait
      grep -q "^$id " "$TMP/events" && break
      sleep 0.2
    done
    die=$(awk -v id="$id" '$1 == id { print $2; exit }' "$TMP/events")
    [ -z "$die" ] || echo $(((die - s) / 1000000)) >>"$TMP/$name.seen"
    echo $((($(ns "$finished") - s) / 1000000)) >>"$TMP/$name.exit"
    $DOCKER rm -f "$id" >/dev/null
  done
  read -r a b c d < <(stats "$TMP/$name.seen")
  read -r e f g h < <(stats "$TMP/$name.exit")
  printf '%-22s %4s %3s | %5s %6s %5s %6s | %5s %6s %5s %6s\n' "$name" "$code" "$N" "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h"
done

if [ "${APPLY:-0}" = 1 ]; then
  bench_build_bottlefile "$TMP"
  body() {
    case $1 in
    missing-command) echo 'command = ["no-such-binary"]' ;;
    shell-exit-3) echo 'command = ["sh", "-c", "exit 3"]' ;;
    entrypoint-first-line) echo 'entrypoint = ["/bin/sh", "-c", "test -f /etc/app.conf || { echo missing /etc/app.conf >&2; exit 1; }; exec sleep 600"]' ;;
    esac
  }
  echo
  echo "bottlefile apply, caught of $N (the apply failed naming the exit code):"
  printf '%-22s' kind
  for w in ${WAITS:-0s 100ms 250ms}; do printf ' %8s' "-wait=$w"; done
  echo
  for name in "${kinds[@]}"; do
    printf '%-22s' "$name"
    for w in ${WAITS:-0s 100ms 250ms}; do
      caught=0
      for i in $(seq "$N"); do
        d=$TMP/apply-$name-$w-$i
        mkdir -p "$d"
        printf 'agent "a" {\n  image = "%s"\n  labels = { "bench.bottlefile.run" = "%s" }\n  %s\n}\n' "$IMAGE" "$RUN" "$(body "$name")" >"$d/Bottlefile"
        if ! "$TMP/bottlefile" -chdir="$d" apply -auto-approve -no-color -wait="$w" >"$d/out" 2>&1 &&
          grep -q "agent.a exited with code" "$d/out"; then
          caught=$((caught + 1))
        fi
        "$TMP/bottlefile" -chdir="$d" destroy -auto-approve >/dev/null 2>&1 || true
        rm -rf "$d"
      done
      printf ' %8s' "$caught/$N"
    done
    echo
  done
fi
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
