#!/usr/bin/env bash
# Abuses an egress gateway on the local Docker engine from inside its
# bottle, as a hostile agent would (issue 17), and prints what it cost the
# docker host (see bench/README.md):
#   - flood:  60 KB bad requests from 16 connections at a time for 10 s;
#             the gateway's log growth (bytes, lines) and CPU (cores);
#   - idle:   3,000 connections kept alive after one request each;
#   - unread: 3,000 connections that send a 60 KB bad request and never
#             read the answer;
#             for both, the gateway's peak memory and open files while they
#             are held, how many the gateway closed, and whether a fresh
#             CONNECT is still answered.
#
# Usage: bench/gateway-abuse.sh     (env: BOTTLEFILE=path to a static build
#        to measure instead of building this tree; FLOOD=10s HOLD=20s N=3000)
set -euo pipefail

flood_for=${FLOOD:-10s}
hold=${HOLD:-20s}
n=${N:-3000}
image=bottlefile-bench/busybox:1
agent=abuse$$

cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/bottlefile-abuse.XXXXXX)
cleanup() {
  [ -f "$work/bf/.bottlefile/state.db" ] && "$work/bottlefile" -chdir="$work/bf" destroy -auto-approve >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "gateway-abuse.sh: $*" >&2; exit 1; }
. bench/lib.sh

echo "building..." >&2
bench_build_bottlefile "$work"
CGO_ENABLED=0 go build -trimpath -o "$work/gatewayabuse" ./bench/gatewayabuse

if ! docker image inspect "$image" >/dev/null 2>&1; then
  [ -x /bin/busybox ] || die "needs the static /bin/busybox (apt-get install -y busybox-static)"
  root=$work/rootfs
  mkdir -p "$root/bin" "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\n' >"$root/etc/group"
  tar -C "$root" -c . | docker import -c 'CMD ["sh"]' -c 'ENV PATH=/bin' - "$image" >/dev/null
fi

mkdir -p "$work/bf"
cat >"$work/bf/Bottlefile" <<EOF
agent "$agent" {
  image   = "$image"
  command = ["sleep", "3600"]
  egress {
    allow = ["example.test:443"]
  }
}
EOF
"$work/bottlefile" -chdir="$work/bf" apply -auto-approve >/dev/null
ag=$(docker ps -q --filter "label=io.bottlefile.address=agent.$agent")
gw=$(docker ps -q --filter "label=io.bottlefile.address=agent.$agent.gateway")
[ -n "$ag" ] && [ -n "$gw" ] || die "no agent or gateway container"
gwaddr=$(docker inspect -f '{{.Name}}' "$gw" | tr -d /):3128
docker cp "$work/gatewayabuse" "$ag:/tmp/gatewayabuse" >/dev/null
gwid=$(docker inspect -f '{{.Id}}' "$gw")
pid=$(docker inspect -f '{{.State.Pid}}' "$gw")
logpath=$(docker inspect -f '{{.LogPath}}' "$gw")
limits=$(docker inspect -f 'memory={{.HostConfig.Memory}} nanocpus={{.HostConfig.NanoCPUs}} pids={{.HostConfig.PidsLimit}} ulimits={{.HostConfig.Ulimits}} log={{.HostConfig.LogConfig.Config}}' "$gw")
echo "gateway $gwid ($gwaddr): $limits"

# Readings from cgroup v1 (this project's engines) or v2, and /proc.
cg() { # cg CONTROLLER FILE
  local f
  for f in "/sys/fs/cgroup/$1/docker/$gwid/$2" "/sys/fs/cgroup/system.slice/docker-$gwid.scope/$2"; do
    [ -r "$f" ] && { cat "$f"; return; }
  done
  echo 0
}
cpu_ns() {
  local v
  v=$(cg cpuacct cpuacct.usage)
  [ "$v" != 0 ] && { echo "$v"; return; }
  echo $(($(cg cpu cpu.stat | awk '/^usage_usec/ {print $2}') * 1000))
}
mem() { local v; v=$(cg memory memory.usage_in_bytes); [ "$v" != 0 ] && echo "$v" || cg memory memory.current; }
logbytes() { cat "$logpath"* 2>/dev/null | wc -c; }
fds() { ls "/proc/$pid/fd" 2>/dev/null | wc -l; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

# sample CMD...: runs CMD in the agent while sampling the gateway every
# 0.5 s, and prints CMD's output; the peaks go to $work/peak.
sample() {
  local out=$work/out p m f peak_mem=0 peak_fds=0
  docker exec "$ag" "$@" >"$out" 2>&1 &
  p=$!
  while kill -0 "$p" 2>/dev/null; do
    m=$(mem); f=$(fds)
    ((m > peak_mem)) && peak_mem=$m
    ((f > peak_fds)) && peak_fds=$f
    sleep 0.5
  done
  wait "$p" || true
  echo "peak memory $(mib "$peak_mem"), open files $peak_fds" >"$work/peak"
  cat "$out"
}
# CPU time (ns) of the engine's processes that carry a container's log.
engine_cpu_ns() {
  local p t=0 tck
  tck=$(getconf CLK_TCK)
  for p in $(pgrep -x dockerd) $(pgrep -x containerd) $(pgrep -f "containerd-shim.*$gwid"); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo $((t * 1000000000 / tck))
}

echo "== flood: 60 KB bad requests, 16 at a time, for $flood_for"
docker logs -f --since 0s "$gw" >"$work/flood.log" 2>&1 &
follow=$!
sleep 1
c0=$(cpu_ns); e0=$(engine_cpu_ns); t0=${EPOCHREALTIME/./}
res=$(sample /tmp/gatewayabuse -mode flood -workers 16 -addr "$gwaddr" -duration "$flood_for")
t1=${EPOCHREALTIME/./}; c1=$(cpu_ns); e1=$(engine_cpu_ns)
sleep 2
kill "$follow" 2>/dev/null || true
echo "client: $res"
echo "log written: $(wc -c <"$work/flood.log") bytes in $(wc -l <"$work/flood.log") lines, longest line $(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$work/flood.log") bytes; on disk now $(mib "$(logbytes)") in $(ls "$logpath"* | wc -l) files"
awk -v c=$((c1 - c0)) -v e=$((e1 - e0)) -v t=$((t1 - t0)) 'BEGIN { printf "cpu: gateway %.2f cores, dockerd+containerd+shim %.2f cores on average\n", c / 1000 / t, e / 1000 / t }'
cat "$work/peak"

for mode in idle unread; do
  flag=""
  [ $mode = unread ] && flag=-unread
  echo "== $mode: $n connections held $hold, then a fresh CONNECT"
  res=$(sample /tmp/gatewayabuse -mode idle $flag -n "$n" -hold "$hold" -addr "$gwaddr" -connect denied.test:443)
  echo "client: $res"
  echo "$(cat "$work/peak"); after: memory $(mib "$(mem)"), open files $(fds)"
done
echo "gateway: $(docker inspect -f 'running={{.State.Running}} restarts={{.RestartCount}} oomkilled={{.State.OOMKilled}}' "$gw")"
