#!/usr/bin/env bash
# Stages a tiny root filesystem (static busybox and its applets) into the
# quickstart's build context, so its image builds FROM scratch with no pull.
set -euo pipefail
root=${1:?usage: quickstart-rootfs.sh DIR}
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/workspace" "$root/home/agent"
chmod 1777 "$root/tmp"
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nagent:x:1000:\n' > "$root/etc/group"
