#!/usr/bin/env bash
# Times bottlefile's kubernetes driver on the k8stest cluster (issue 29; see
# bench/README.md) against kubectl doing the same work:
#   - apply of N agents (default 30), each with an egress allowlist of one
#     host, so each bottle is a namespace, two NetworkPolicies, the agent's
#     Pod, the gateway's Pod, its Service and ConfigMap; until every Pod
#     runs;
#   - a no-op plan (it must say "No changes.");
#   - destroy, until the namespaces are gone;
# against
#   - kubectl apply -f of the same objects (taken from what the driver made
#     in the first round: kubectl get ns,netpol,cm,svc,pod -l LINEAGE, with
#     status, uid, resourceVersion, nodeName and the like dropped, the
#     namespaces renamed), the namespaces first and, once each has its
#     "default" ServiceAccount (a Pod is refused before), the rest; then
#     kubectl wait --for=condition=Ready pod -A -l LINEAGE;
#   - kubectl get of the same kinds and label (the one list per kind a
#     plan's refresh makes);
#   - kubectl delete ns ..., which waits until they are gone.
# EGRESS=0 declares the agents without an egress block: a bottle is then a
# namespace, its "bottle" NetworkPolicy and the agent's Pod.
# Each is repeated REPS times (default 3), interleaved, after one warm-up
# round (WARMUP=0 skips it); medians and ratios are printed at the end.
# TRACE=1 ends with a traced apply and destroy (BOTTLEFILE_LOG=trace): the
# driver's log lines by message, and for each of the six commands the API
# requests the server counted meanwhile (apiserver_request_total by verb
# and resource: all clients, the kubelet's and controllers' included).
#
# The cluster: bench/k8scluster (go test) starts the k8stest cluster and
# holds it while the rounds run, and tears it down at the end. It needs the
# binaries drivers/kubernetes/k8stest/build.sh makes. CLUSTER=FILE uses a
# cluster held already: FILE is the info file of a running
#   BOTTLEFILE_BENCH_CLUSTER=FILE go test -count=1 -timeout=0 -run TestBenchCluster ./bench/k8scluster/
#
# Usage: bench/kubernetes.sh             (env: N=30 REPS=3 WARMUP=1 EGRESS=1 TRACE=0 CLUSTER=)
#        N=5 REPS=1 bench/kubernetes.sh  (a quick check)
set -euo pipefail

n=${N:-30}
reps=${REPS:-3}
warmup=${WARMUP:-1}
egress=${EGRESS:-1}
timeout=${TIMEOUT:-600s}

cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d /tmp/bottlefile-k8sbench.XXXXXX)
run=$$
bfprefix="bfb$run-" # the namespaces bottlefile makes
kcprefix="kcb$run-" # the namespaces kubectl makes, of the same objects
kclineage="kubectl-bench-$run"
lineage_label=io.bottlefile.lineage
cluster_pid=""
info=${CLUSTER:-}

die() { echo "kubernetes.sh: $*" >&2; exit 1; }

cleanup() {
  local d ns
  for d in "$work"/bf-*; do
    [ -f "$d/.bottlefile/state.db" ] && "$work/bottlefile" -chdir="$d" destroy -auto-approve >/dev/null 2>&1 || true
  done
  if [ -n "${K8S_KUBECONFIG:-}" ]; then
    ns=$(kc get ns -o name 2>/dev/null | grep -E "^namespace/($bfprefix|$kcprefix)" || true)
    [ -z "$ns" ] || kc delete --timeout=120s $ns >/dev/null 2>&1 || true
  fi
  if [ -n "$cluster_pid" ]; then # our cluster: removing the info file ends it
    rm -f "$info"
    wait "$cluster_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "building bottlefile..."
bench_build_bottlefile "$work"

if [ -z "$info" ]; then
  info=$work/cluster.env
  echo "starting the k8stest cluster (bench/k8scluster)..."
  BOTTLEFILE_BENCH_CLUSTER=$info go test -count=1 -timeout=0 -run TestBenchCluster ./bench/k8scluster/ >"$work/cluster.log" 2>&1 &
  cluster_pid=$!
  while [ ! -f "$info" ]; do
    kill -0 "$cluster_pid" 2>/dev/null || die "the cluster did not start: $(tail -20 "$work/cluster.log")"
    sleep 0.5
  done
fi
[ -f "$info" ] || die "no cluster info file $info"
. "$info"
kc() { "$K8S_KUBECTL" --kubeconfig "$K8S_KUBECONFIG" "$@"; }

now() { echo "${EPOCHREALTIME/./}"; } # microseconds

# measure NAME CMD...: runs CMD and appends its wall time (µs) to NAME.
measure() {
  local name=$1 t0
  shift
  t0=$(now)
  "$@"
  echo $(($(now) - t0)) >>"$work/times.$name"
}

# --- bottlefile
bottlefile_dir() { # bottlefile_dir NAME: a fresh directory with N agents, each with an egress allowlist unless EGRESS=0
  local dir=$work/bf-$1 i block=""
  ((egress)) && block='  egress {\n    allow = ["example.com:443"]\n  }\n'
  rm -rf "$dir"
  mkdir -p "$dir"
  printf 'runtime "k" {\n  driver           = "kubernetes"\n  kubeconfig       = "%s"\n  registry         = "%s"\n  namespace_prefix = "%s"\n  gateway_binary   = "%s"\n}\n\n' \
    "$K8S_KUBECONFIG" "$K8S_REGISTRY" "$bfprefix" "$work/bottlefile" >"$dir/Bottlefile"
  for ((i = 0; i < n; i++)); do
    printf 'agent "a%d" {\n  runtime = runtime.k\n  image   = "%s"\n  command = ["sleep", "600"]\n'"$block"'}\n\n' "$i" "$K8S_BUSYBOX"
  done >>"$dir/Bottlefile"
  echo "$dir"
}
bf() { "$work/bottlefile" -chdir="$1" "${@:2}" >"$1/out.log" 2>&1 || { cat "$1/out.log" >&2; die "bottlefile ${*:2} failed"; }; }
bf_apply() {
  "$work/bottlefile" -chdir="$1" apply -auto-approve >"$1/out.log" 2>&1 && return 0
  cat "$1/out.log" >&2
  # Each gateway's Pod requests 10m CPU and 32Mi (drivers/kubernetes/
  # gateway.go): a node short of even that says so.
  grep -q -E "Insufficient (cpu|memory)" "$1/out.log" &&
    echo "kubernetes.sh: the node (allocatable CPU $(kc get node "$K8S_NODE" -o jsonpath='{.status.allocatable.cpu}'), memory $(kc get node "$K8S_NODE" -o jsonpath='{.status.allocatable.memory}')) cannot hold $n bottles' Pods; EGRESS=0 or a smaller N runs" >&2
  die "bottlefile apply -auto-approve failed"
}
bf_plan() { bf "$1" plan && grep -q "No changes." "$1/out.log" || die "the plan after apply is not empty: $(cat "$1/out.log")"; }
bf_destroy() { bf "$1" destroy -auto-approve; }
bf_lineage() { # the lineage of the state in DIR, from the namespaces it made
  kc get ns -o json | jq -r --arg p "$bfprefix" --arg l "$lineage_label" \
    '[.items[] | select(.metadata.name | startswith($p)) | .metadata.labels[$l]] | unique | .[]'
}

# --- kubectl: the objects the driver made, captured once
capture() { # capture LINEAGE: writes ns.json and rest.json of what the driver made, renamed
  local l=$1
  kc get ns,netpol,cm,svc,pod -A -l "$lineage_label=$l" -o json >"$work/captured.json"
  # Textual renames first (namespace names appear in labels, host aliases
  # and annotations too), then drop what the server sets.
  sed -e "s/$bfprefix/$kcprefix/g" -e "s/$l/$kclineage/g" "$work/captured.json" |
    jq '.items |= map(
          del(.status, .metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp,
              .metadata.managedFields, .metadata.generation, .metadata.selfLink, .metadata.deletionTimestamp)
          | if .kind == "Pod" then del(.spec.nodeName) else . end
          | if .kind == "Service" then del(.spec.clusterIP, .spec.clusterIPs) else . end)' >"$work/clean.json"
  jq '.items |= map(select(.kind == "Namespace"))' "$work/clean.json" >"$work/ns.json"
  jq '.items |= map(select(.kind != "Namespace"))' "$work/clean.json" >"$work/rest.json"
  kc_ns=$(jq -r '.items[].metadata.name' "$work/ns.json" | sort)
  local kinds
  kinds=$(jq -r '[.items[].kind] | group_by(.) | map("\(length) \(.[0])") | join(", ")' "$work/clean.json")
  echo "captured from bottlefile's apply: $kinds"
  [ "$(echo "$kc_ns" | wc -l)" -eq "$n" ] || die "captured $(echo "$kc_ns" | wc -l) namespaces, not $n"
}
kc_wait_sa() { # until every namespace has its default ServiceAccount (Pods are refused before)
  local have
  while :; do
    have=$(kc get sa -A --field-selector metadata.name=default -o jsonpath='{range .items[*]}{.metadata.namespace}{"\n"}{end}' |
      grep -c "^$kcprefix" || true)
    [ "$have" -ge "$n" ] && return 0
    sleep 0.1
  done
}
kc_apply() {
  kc apply -f "$work/ns.json" >/dev/null &&
    kc_wait_sa &&
    kc apply -f "$work/rest.json" >/dev/null &&
    kc wait --for=condition=Ready pod -A -l "$lineage_label=$kclineage" --timeout="$timeout" >/dev/null
}
kc_plan() { kc get ns,netpol,cm,svc,pod -A -l "$lineage_label=$kclineage" -o json >"$work/kc-get.json"; }
kc_destroy() { kc delete --timeout="$timeout" $(printf 'namespace/%s ' $kc_ns) >/dev/null; }
kc_check() { # the kubectl side made what bottlefile made: as many Pods running, and the same kinds
  local got want
  got=$(jq -r '[.items[] | select(.kind == "Pod" and .status.phase == "Running")] | length' "$work/kc-get.json")
  want=$(jq -r '[.items[] | select(.kind == "Pod")] | length' "$work/clean.json")
  [ "$got" -eq "$want" ] || die "kubectl's apply left $got of $want Pods running"
}

kc_ns=""
round() { # round NAME: bottlefile's apply, plan, destroy, then kubectl's
  local dir
  dir=$(bottlefile_dir "$1")
  measure bf_apply bf_apply "$dir"
  if [ -z "$kc_ns" ]; then
    local l
    l=$(bf_lineage)
    [ -n "$l" ] && [ "$(echo "$l" | wc -l)" -eq 1 ] || die "cannot tell the lineage of bottlefile's namespaces: '$l'"
    capture "$l"
  fi
  measure bf_plan bf_plan "$dir"
  measure bf_destroy bf_destroy "$dir"
  measure kc_apply kc_apply
  measure kc_plan kc_plan
  kc_check
  measure kc_destroy kc_destroy
}

echo "$(date -u +%Y-%m-%dT%H:%MZ) cluster: $(kc version -o json | jq -r .serverVersion.gitVersion), node $K8S_NODE, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
if ((warmup)); then
  echo "warm-up round..."
  round warmup
  rm -f "$work"/times.*
fi
for ((r = 1; r <= reps; r++)); do
  echo "round $r of $reps..."
  round "$r"
done

median() { sort -n "$work/times.$1" | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.3f", m / 1e6}'; }
samples() { awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e6}' "$work/times.$1"; }
# paired A B: the median over rounds of A's time / B's time in that round.
paired() { paste "$work/times.$1" "$work/times.$2" | awk '{print $1 / $2}' | sort -g | awk '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.2f", m}'; }
row() { # row LABEL BF BASE BASELINE-NAME
  local b c
  b=$(median "$2")
  c=$(median "$3")
  printf '%-28s %8ss %8ss %7s %7s   %s\n' "$1" "$b" "$c" "$(awk -v b="$b" -v c="$c" 'BEGIN {printf "%.2f", b / c}')" "$(paired "$2" "$3")" "$4"
}

echo
if ((egress)); then
  echo "$n agents, each with an egress allowlist (a namespace, 2 NetworkPolicies, agent and gateway Pods, a Service, a ConfigMap)"
else
  echo "$n agents without egress (a namespace, its NetworkPolicies, the agent's Pod)"
fi
echo "medians of $reps rounds (seconds); ratio = bottlefile / kubectl of the medians; paired = median of the rounds' ratios"
printf '%-28s %9s %9s %7s %7s   %s\n' "" bottlefile kubectl ratio paired baseline
row "apply, $n bottles" bf_apply kc_apply "kubectl apply -f (namespaces, their ServiceAccounts, the rest) + kubectl wait Ready"
row "no-op plan, $n bottles" bf_plan kc_plan "kubectl get ns,netpol,cm,svc,pod -A -l lineage"
row "destroy, $n bottles" bf_destroy kc_destroy "kubectl delete namespace ... (waits until gone)"
echo "samples (seconds):"
for x in bf_apply kc_apply bf_plan kc_plan bf_destroy kc_destroy; do
  printf '  %-12s %s\n' "$x" "$(samples "$x")"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

((${TRACE:-0})) || exit 0

# requests: apiserver_request_total summed by "verb resource".
requests() { kc get --raw /metrics | awk '/^apiserver_request_total\{/ {
    v = $0; sub(/.*[{,]verb="/, "", v); sub(/".*/, "", v)
    r = $0; sub(/.*[{,]resource="/, "", r); sub(/".*/, "", r)
    s = $0; sub(/.*[{,]subresource="/, "", s); sub(/".*/, "", s)
    if (r == "") r = "-"; if (s != "") r = r "/" s
    c[v " " r] += $NF } END { for (k in c) print k, c[k] }' | sort; }
# traced NAME CMD...: runs CMD, prints its time and the API requests the
# server counted meanwhile, by verb and resource, most first.
traced() {
  local name=$1 t0 t1
  shift
  requests >"$work/req.before"
  t0=$(now)
  "$@"
  t1=$(now)
  requests >"$work/req.after"
  echo
  echo "$name: $(((t1 - t0) / 1000)) ms; API requests meanwhile (all clients), by verb and resource:"
  awk 'NR == FNR {b[$1 " " $2] = $3; next} {d = $3 - b[$1 " " $2]; if (d > 0) {print d, $1, $2; t += d}} END {print t, "total"}' \
    "$work/req.before" "$work/req.after" | sort -rn | head -16 | sed 's/^/  /'
}
dir=$(bottlefile_dir trace)
bf_traced() { # bf_traced NAME ARGS...: bottlefile ARGS with BOTTLEFILE_LOG=trace into trace-NAME.log
  BOTTLEFILE_LOG=trace "$work/bottlefile" -chdir="$dir" "${@:2}" >"$dir/out.log" 2>"$dir/trace-$1.log" ||
    die "traced bottlefile ${*:2} failed: $(tail -5 "$dir/trace-$1.log")"
}
traced "bottlefile apply" bf_traced apply apply -auto-approve
traced "bottlefile plan" bf_traced plan plan
traced "bottlefile destroy" bf_traced destroy destroy -auto-approve
traced "kubectl apply + wait" kc_apply
traced "kubectl get" kc_plan
traced "kubectl delete namespace" kc_destroy
for c in apply plan destroy; do
  f=$dir/trace-$c.log
  echo
  echo "bottlefile $c: its log (BOTTLEFILE_LOG=trace), messages by count, with the first and last time each was logged:"
  awk '/request\.go.*client-side throttling/ {d = $0; sub(/.*delay="/, "", d); sub(/s".*/, "", d); waits++; waited += d; next}
       !/^[0-9][0-9][0-9][0-9]-/ {next}
       {t = $1; $1 = ""; m = $0; sub(/^ +\[[A-Z]+\] +/, "", m); sub(/: [a-z_]+=.*/, "", m)
        if (!(m in n)) {first[m] = t; order[++k] = m}; n[m]++; last[m] = t}
        END {for (i = 1; i <= k; i++) printf "  %4d  %s .. %s  %s\n", n[order[i]], substr(first[order[i]], 12, 12), substr(last[order[i]], 12, 12), order[i]
        if (waits) printf "  client-go throttled %d requests (its default 5 requests/s, bursts of 10), %.1f s of waits in all\n", waits, waited}' "$f" | tail -40
done
