// Package kubernetes is bottlefile's driver for a Kubernetes cluster,
// through its API server (client-go). Each bottle is a namespace of its
// own; nothing of it needs a cluster DNS.
//
// # Runtime block
//
//	runtime "k" {
//	  driver           = "kubernetes"
//	  kubeconfig       = "~/.kube/config"  # optional: else KUBECONFIG, then ~/.kube/config
//	  context          = "prod"            # optional: else the kubeconfig's current context
//	  namespace_prefix = "bf-"             # optional: begins every namespace the driver makes
//	  registry         = "10.0.0.5:5000"   # where the gateway image (and snapshots) go; needed for egress
//	  node_containerd  = { "node-1" = "unix:///run/containerd/containerd.sock" } # each node's containerd (snapshots: snapshot.go)
//	  gateway_binary   = "/path/to/bottlefile" # optional: a static build; else the running one
//	  gateway_dns      = ["10.0.0.53"]     # optional: the gateways' DNS servers
//	  credential_ca_file = "corp-ca.pem"   # optional: CAs the gateways trust for credential hosts
//	}
//
// An agent's driver block places its bottle's Pods:
//
//	driver {
//	  node_selector = { "pool" = "agents" }
//	  tolerations   = [{ key = "dedicated", operator = "Equal", value = "agents", effect = "NoSchedule" }]
//	}
//
// # Objects
//
// For an agent "coder" in a state of lineage L, Plan returns:
//
//   - agent.coder.network (kind "namespace"): the namespace
//     <prefix><L[:8]>-coder, labelled with the lineage, its address and
//     configuration hash as annotations (an address is no label value);
//     its NetworkPolicies: "bottle" (every Pod of it reaches the
//     namespace's Pods and the cluster DNS's port 53, nothing else, and
//     is reached from the namespace's Pods only) and "gateway-egress"
//     (the gateway's Pod reaches anything; its forbid file keeps it off
//     the nodes, the Pod ranges, the API server and the Service ranges
//     but the Services outside the bottles that exist when the driver
//     first makes a gateway, so that no allowlist reaches another
//     bottle's Service); and, with egress,
//     the Service "gateway" (port 3128), which lives as long as the
//     namespace so that its address, which the workloads' host aliases
//     name, survives a new gateway.
//   - agent.coder.sidecar.NAME (kind "pod"): the Pod sidecar-NAME and a
//     headless Service NAME (a cluster with DNS resolves it too).
//   - agent.coder (kind "pod"): the Pod "agent". It depends on its
//     sidecars: its host aliases name their Pod addresses (every port a
//     sidecar listens on works, which a Service's fixed ports would not),
//     so a sidecar replaced replaces the agent.
//   - agent.coder.gateway (kind "gateway"), with an egress block: the
//     ConfigMap gateway-rules (its rules and forbid files; its UID is the
//     object's id) and the Pod "gateway" running the gateway image,
//     pushed to the registry by digest (gwimage.go), as 65534 with no
//     capability. A new allowlist rewrites the ConfigMap and makes the
//     gateway's Pod again behind its Service. With credential blocks, the
//     Secret gateway-credentials holds the credentials file, mounted by
//     the gateway's Pod alone, and the agent's Pod gets placeholders and
//     the ConfigMap bottle-ca at /etc/bottlefile (credentials.go); a
//     rotated value rewrites the Secret and makes the gateway's Pod again.
//
// Every Pod runs with no service-account token and no service links,
// imagePullPolicy IfNotPresent, a three-second grace period. A Pod's spec
// cannot change: any change to a workload is a new Pod, which the plan
// shows as a replacement. The workloads get HTTP(S)_PROXY naming the
// gateway, NO_PROXY their sidecars.
//
// A workload's cpus and memory are its container's limits; it requests
// its memory limit and a tenth of its CPU limit (at least 10m). The
// gateway's Pod is limited to gateway.CPUs and gateway.Memory and
// requests 10m and 32Mi, so that a small node holds many bottles.
//
// Apply waits for a Pod's container to run, watching the Pod (one list,
// then one watch; no polling); a Pod the scheduler cannot place
// (PodScheduled=False, Unschedulable) fails the apply at once with the
// scheduler's message, as an image that cannot be pulled or a container
// that keeps exiting does. A create that finds a Pod of its name (what a
// cut-off apply left) deletes it, waits for it to go and creates again.
// A Pod's delete does not wait for it to go: a Pod being deleted reads as
// gone, and a namespace's delete waits until the namespace, with all it
// holds, is gone. The API client's rate limit is kubectl's (50 requests
// a second, bursts of 300), not client-go's default (5, 10).
//
// # Read and drift
//
// Read lists namespaces, Pods, ConfigMaps and NetworkPolicies of the
// lineage, one call per kind across all namespaces. A Pod carries a
// fingerprint of what bottlefile set (image, command, env, labels,
// tolerations, deadline): one changed outside bottlefile reads as
// drifted, saying what. A NetworkPolicy deleted, or changed (its
// generation past 1), drifts its namespace. A Pod deleted is gone: the
// plan makes it again; a gateway's Pod deleted reads as not running, and
// starting it makes the Pod again from its ConfigMap.
//
// # Not done
//
// Stop is not offered (a Pod cannot be stopped and kept). Credentials
// are done (credentials.go), but for the agent's CA bundle, which is the
// host's rather than its image's. Snapshots are done (snapshot.go,
// through each node's containerd: node_containerd).
package kubernetes
