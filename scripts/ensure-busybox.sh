#!/usr/bin/env bash
# The tests and the quickstart build their images locally (no registry is
# reachable) from Debian's static busybox. Install it when it is missing.
set -euo pipefail
[ -x /bin/busybox ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "busybox-static is missing: run 'sudo apt-get install -y busybox-static'" >&2
  exit 1
fi
echo "installing busybox-static" >&2
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
