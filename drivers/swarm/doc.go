// Package swarm is bottlefile's driver for Docker Swarm mode: the
// distributed engine built into every Docker engine (docker swarm init,
// join). Bottles run on any node of the cluster, placed by constraints.
//
// # Runtime block
//
//	runtime "fleet" {
//	  driver   = "swarm"
//	  host     = "unix:///var/run/docker.sock" # a manager's engine; else DOCKER_HOST
//	  registry = "registry.internal:5000"      # optional: where built images and snapshots go, so every node can run them
//	  registry_url = "https://registry.internal:5000" # optional: the registry's API as bottlefile reaches it
//	  node_hosts = { "node-2" = "tcp://10.0.0.12:2376" } # optional: each node's engine, by hostname
//	  node_timeout = "30s" # optional: bound on each node and registry call (bounds.go)
//
//	  egress_network = "corp-egress"   # optional: an existing overlay for the gateways
//	  gateway_binary = "/path/to/bottlefile" # optional: a static build; else the running one
//	  gateway_dns    = ["10.0.0.53"]   # optional: the gateways' DNS servers
//	}
//
// The driver talks to one manager, through a driver of that one engine
// (engine.Driver: the docker driver, as cmd/bottlefile wires it with
// Factory(docker.NewEngine)); it shares that driver's connection, image
// builds and snapshots rather than copying them, and never imports it.
// The gateway image is drivers/engine's, its files drivers/gateway's.
//
// # Objects
//
// For an agent "coder" in a state of lineage L, Plan returns:
//
//   - agent.coder.network (kind "network"): an internal overlay network
//     bf-<L[:8]>-coder. A task on it reaches nothing outside it. Computed:
//     name, subnet.
//   - agent.coder.image (kind "image"), for a build block only: built on
//     the manager's engine by the docker driver, then tagged
//     REGISTRY/bf-<L[:8]>-coder:<context_hash[:12]> and pushed to the
//     registry. Computed: image_id, tag, ref (what the service runs).
//     Deleting it deletes its manifest from the registry by digest, then
//     removes it from the manager, and from each node of node_hosts
//     (which pulled it to run a task; a node down keeps it, recorded for a
//     later apply or destroy: nodecopy.go); without node_hosts the nodes
//     keep their copies, and the apply says so. A build whose push failed
//     reads as unfinished and is made again.
//   - agent.coder (kind "service", a workload): a one-replica service
//     bf-<L[:8]>-coder on the bottle's network, with DNS round robin (no
//     virtual IP: it needs IPVS, which many kernels lack), an init
//     process, a one-second stop grace period, restarted on failure, with
//     the proxy settings pointing at its gateway as the docker driver sets
//     them, without CAP_NET_RAW, and with the agent's placement
//     constraints (its driver block: placement = ["node.labels.pool==x"]).
//     Apply waits until its task runs; a task that cannot be placed or
//     started fails the apply, naming the constraints or the image, and
//     the service is removed. Nothing of a service changes in place: any
//     change to it makes the cluster start a new task, which loses what
//     the old one wrote, so the plan says replace. Computed: name, node.
//   - agent.coder.sidecar.S (kind "service", a workload), one per sidecar
//     block: like the agent's, with the network alias S, and with the
//     agent's placement.
//   - agent.coder.gateway (kind "gateway", a workload), only for an agent
//     with an egress block: the egress gateway, "bottlefile gateway" from
//     the gateway image (drivers/engine; pushed to the registry), as a
//     service on the bottle's network (alias "gateway", listening only on
//     its address there) and on the runtime's egress network, through
//     which it reaches the outside (docker_gwbridge on its node). Its
//     rules and forbidden prefixes are swarm configs; a new allowlist is a
//     new config and a new gateway task, and the agent is not touched.
//   - runtime.<R>.egress (kind "network"), unless the runtime names an
//     egress_network: a normal overlay bf-<L[:8]>-<R>.egress that every
//     gateway of the runtime shares.
//
// Without a registry, an image built for a bottle exists only on the
// manager's engine: its services get the constraint node.id==<manager>
// (shown in the plan as placement), instead of tasks being rejected on the
// nodes that lack it. The same holds for the gateway image.
//
// Every service carries io.bottlefile.spec, a fingerprint of the parts
// of its spec bottlefile sets (drift.go): Read reports a service changed
// or scaled outside bottlefile as drift, which the planner replaces.
//
// Every service, network and config carries the labels
// io.bottlefile.lineage, io.bottlefile.address and
// io.bottlefile.config-hash, and so does every task's container
// (ContainerSpec labels). Read lists services, tasks, networks, images and
// nodes with one call each.
//
// Snapshots (kind "snapshot") live in the registry: snapshot.go; a node's
// own engine is reached through node_hosts: nodes.go.
//
// exec and logs reach a task's container through the engine of the node
// it runs on: workload.go; so does the look at an agent's use for idle
// policies: activity.go.
package swarm
