# Shared by the bench scripts (sourced, not run).

# bench_busybox_image DOCKER IMAGE DIR imports IMAGE from a root
# filesystem of the static busybox built in DIR, unless the engine has it
# already: no registry is needed.
bench_busybox_image() {
  local docker=$1 image=$2 root=$3/rootfs a
  $docker image inspect "$image" >/dev/null 2>&1 && return 0
  [ -x /bin/busybox ] || { echo "needs the static /bin/busybox (apt-get install -y busybox-static)" >&2; return 1; }
  mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/root"
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\n' >"$root/etc/group"
  tar -C "$root" -c . | $docker import -c 'CMD ["sh"]' -c 'ENV PATH=/bin' - "$image" >/dev/null ||
    { echo "importing $image failed" >&2; return 1; }
}

# bench_remove_lineage DOCKER LINEAGE removes every container, network
# and image carrying the lineage label, and says how many are left.
bench_remove_lineage() {
  local docker=$1 f="label=io.bottlefile.lineage=$2" left
  $docker rm -f $($docker ps -aq --filter "$f") >/dev/null 2>&1
  $docker network rm $($docker network ls -q --filter "$f") >/dev/null 2>&1
  for _ in 1 2 3 4 5; do # children before parents
    $docker rmi -f $($docker image ls -aq --filter "$f") >/dev/null 2>&1
  done
  left=$( ($docker ps -aq --filter "$f"; $docker network ls -q --filter "$f"; $docker image ls -aq --filter "$f") | wc -l)
  [ "$left" -eq 0 ] || echo "cleanup: $left objects with lineage $2 are left" >&2
}

# bench_build_bottlefile DIR puts bottlefile and, beside it, the gateway
# alone (bottlefile-gateway) in DIR, as make build does: $BOTTLEFILE and
# the bottlefile-gateway beside it when set, else a static build of both.
bench_build_bottlefile() {
  local dir=$1
  if [ -n "${BOTTLEFILE:-}" ]; then
    cp "$BOTTLEFILE" "$dir/bottlefile" || return 1
    local gw
    gw="$(dirname "$BOTTLEFILE")/bottlefile-gateway"
    if [ -e "$gw" ]; then cp "$gw" "$dir/bottlefile-gateway" || return 1; fi
    return 0
  fi
  CGO_ENABLED=0 go build -trimpath -o "$dir/" ./cmd/bottlefile ./cmd/bottlefile-gateway
}
