#!/usr/bin/env bash
# build.sh: builds what the kubernetes test cluster (package k8stest) runs,
# once, into a cache outside the clone, and does nothing when it is there:
#
#   $BOTTLEFILE_K8S_CACHE (default ~/.cache/bottlefile/k8s-1.34.4)
#     kbuild/bin/   kube-apiserver kube-controller-manager kube-scheduler
#                   kubelet kube-proxy kubectl (k8s.io/kubernetes v1.34.4)
#                   kube-router (v2.1.0, its NetworkPolicy firewall only)
#     images/       pause.tar busybox.tar: docker-archive tarballs, and
#                   pause-root/pause, the cluster namespaces' first process
#
# The Kubernetes binaries are `go build`s of the k8s.io/kubernetes module
# (a go.mod that pins its 31 staging modules to v0.34.4), so they come from
# the Go module proxy like every other module; cold (modules downloaded,
# nothing of Kubernetes in the Go build cache) they took 32 minutes on a
# loaded 2-core machine, from a warm Go build cache 3 minutes, and nothing
# when the binaries are there. Everything else the cluster runs is a
# Debian package (see .ci/run). Builds are niced and serialized by a lock
# (build.lock), which k8stest.Start waits on: a test run may start while
# this builds.
#
# Usage: drivers/kubernetes/k8stest/build.sh        (idempotent)
#        drivers/kubernetes/k8stest/build.sh images (only the two images)
#        BOTTLEFILE_K8S_BUILD_P=2 ... build.sh      (go build -p; default 2)
set -euo pipefail
KVER=1.34.4
ROUTER=v2.1.0
CACHE=${BOTTLEFILE_K8S_CACHE:-$HOME/.cache/bottlefile/k8s-$KVER}
KB=$CACHE/kbuild
BIN=$KB/bin
IMG=$CACHE/images
P=${BOTTLEFILE_K8S_BUILD_P:-2}
COMPONENTS="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
log() { echo "k8s-build [$(date -u +%T)] $*"; }

mkdir -p "$BIN" "$IMG"
exec 9>"$CACHE/build.lock"
flock 9

missing=()
only=${1:-all}
[ "$only" = all ] || [ "$only" = images ] || { echo "usage: $0 [images]" >&2; exit 2; }
[ "$only" = images ] || for c in $COMPONENTS; do [ -x "$BIN/$c" ] || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
  cd "$KB"
  if [ ! -f go.mod ] || [ ! -f tools.go ]; then
    log "writing the build module for k8s.io/kubernetes v$KVER"
    go mod download -json "k8s.io/kubernetes@v$KVER" >/dev/null
    KK=$(go env GOMODCACHE)/k8s.io/kubernetes@v$KVER
    {
      echo 'module example.com/kbuild'; echo; echo 'go 1.24.0'; echo
      echo "require k8s.io/kubernetes v$KVER"; echo; echo 'replace ('
      # k/k's go.mod replaces each staging module by ./staging/...; as a
      # dependency those replaces are ignored and it requires v0.0.0:
      # pin each one to the release's v0.MINOR.PATCH.
      for m in $(grep -E '=> ./staging' "$KK/go.mod" | awk '{print $1}'); do echo "	$m => $m v0.${KVER#1.}"; done
      echo ')'
    } > go.mod.tmp
    printf '//go:build tools\n\npackage kbuild\n\nimport (\n' > tools.go.tmp
    for c in $COMPONENTS; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >> tools.go.tmp; done
    echo ')' >> tools.go.tmp
    mv go.mod.tmp go.mod && mv tools.go.tmp tools.go
    GOFLAGS=-mod=mod go mod tidy
  fi
  minor=$(echo $KVER | cut -d. -f2)
  LD="-s -w -X k8s.io/component-base/version.gitVersion=v$KVER -X k8s.io/component-base/version.gitMajor=1"
  LD="$LD -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  LD="$LD -X k8s.io/client-go/pkg/version.gitVersion=v$KVER"
  for c in "${missing[@]}"; do
    s=$(date +%s)
    # Into a temporary name, then renamed: a killed build leaves no
    # half-written binary that the next run would take as built.
    GOFLAGS=-mod=mod CGO_ENABLED=0 nice -n 19 go build -p "$P" -trimpath -ldflags "$LD" -o "$BIN/.$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$BIN/.$c.tmp" "$BIN/$c"
    log "built $c in $(( $(date +%s) - s ))s"
  done
fi
if [ "$only" = all ] && [ ! -x "$BIN/kube-router" ]; then
  s=$(date +%s)
  tmp=$(mktemp -d "$CACHE/.router.XXXXXX")
  GOBIN=$tmp CGO_ENABLED=0 nice -n 19 go install -p "$P" -trimpath -ldflags "-s -w" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$ROUTER"
  mv "$tmp/kube-router" "$BIN/kube-router" && rmdir "$tmp"
  log "built kube-router $ROUTER in $(( $(date +%s) - s ))s"
fi

# mkimage ROOTFS NAME:TAG CMD-JSON OUT: a one-layer docker-archive tarball.
mkimage() {
  local root=$1 ref=$2 cmd=$3 out=$4 w ld cd
  w=$(mktemp -d)
  tar -C "$root" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" .
  ld=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  mkdir "$w/$ld" && mv "$w/layer.tar" "$w/$ld/layer.tar"
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin:/usr/bin"],"Cmd":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$cmd" "$ld" > "$w/config.json"
  cd=$(sha256sum "$w/config.json" | cut -d' ' -f1)
  mv "$w/config.json" "$w/$cd.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cd" "$ref" "$ld" > "$w/manifest.json"
  tar -C "$w" -cf "$out.tmp" manifest.json "$cd.json" "$ld"
  mv "$out.tmp" "$out"
  rm -rf "$w"
}

if [ ! -f "$IMG/pause.tar" ] || [ ! -x "$IMG/pause-root/pause" ]; then
  # pause: the sandbox ("infra") container of every Pod, and the first
  # process of the cluster's namespaces: waits for a signal, reaps zombies.
  rm -rf "$IMG/pause-src" "$IMG/pause-root"
  mkdir -p "$IMG/pause-src" "$IMG/pause-root"
  printf 'module example.com/pause\n\ngo 1.22\n' > "$IMG/pause-src/go.mod"
  cat > "$IMG/pause-src/main.go" <<'GO'
// pause waits for SIGINT or SIGTERM and reaps the zombies it inherits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	s := make(chan os.Signal, 1)
	signal.Notify(s, syscall.SIGCHLD)
	go func() {
		for range s {
			for {
				var ws syscall.WaitStatus
				if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
					break
				}
			}
		}
	}()
	<-c
}
GO
  (cd "$IMG/pause-src" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$IMG/pause-root/pause" .)
  mkimage "$IMG/pause-root" local/pause:1 '["/pause"]' "$IMG/pause.tar"
  log "made images/pause.tar"
fi
if [ ! -f "$IMG/busybox.tar" ]; then
  [ -x /bin/busybox ] || { echo "k8s-build: /bin/busybox is missing (apt-get install busybox-static)" >&2; exit 1; }
  rm -rf "$IMG/bb-root"
  mkdir -p "$IMG/bb-root/bin" "$IMG/bb-root/tmp" "$IMG/bb-root/etc"
  cp /bin/busybox "$IMG/bb-root/bin/busybox"
  for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$IMG/bb-root/bin/$a"; done
  echo 'root:x:0:0:root:/:/bin/sh' > "$IMG/bb-root/etc/passwd"
  echo 'root:x:0:' > "$IMG/bb-root/etc/group"
  chmod 1777 "$IMG/bb-root/tmp"
  mkimage "$IMG/bb-root" local/busybox:1 '["/bin/sh"]' "$IMG/busybox.tar"
  rm -rf "$IMG/bb-root"
  log "made images/busybox.tar"
fi
log "ready: $BIN, $IMG"
