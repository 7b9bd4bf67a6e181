// Package docker is bottlefile's driver for the Docker engine (API 1.41 and
// later, through github.com/docker/docker/client with version negotiation).
//
// # Runtime block
//
//	runtime "local" {
//	  driver      = "docker"
//	  host        = "unix:///var/run/docker.sock" # optional; else DOCKER_HOST
//	  subnet_pool = "10.213.0.0/16"               # optional; the default
//
//	  # host may be tcp://HOST:PORT, with TLS from these (all optional):
//	  tls_ca   = "certs/ca.pem"   # the CA the engine's certificate must be signed by
//	  tls_cert = "certs/cert.pem" # the client certificate the engine asks for
//	  tls_key  = "certs/key.pem"  # its key
//	  # or ssh://USER@HOST[:PORT]: ssh runs `docker system dial-stdio` there
//
//	  egress_network     = "corp-egress"   # optional: an existing network for the gateways
//	  egress_subnet_pool = "10.214.0.0/16" # optional; the default, for a managed one
//	  gateway_dns        = ["10.0.0.53"]   # optional: the gateways' DNS servers
//	  gateway_binary     = "/path/to/bottlefile" # optional: a static build; else the running one
//	  credential_ca_file = "corp-ca.pem"   # optional: CAs the gateways trust for credential hosts
//	  insecure_skip_isolation_check = false # true only for throwaway test engines
//	}
//
// Configure only makes the client (drivers/engine, shared with the swarm
// driver); the engine is first contacted by Read, Plan or Apply, which
// check once that it answers with API 1.41 or later. Plan makes one read-only call per driver instance: the
// isolation check (isolation.go), which refuses an engine on which a
// bottle's isolation cannot hold (dockerd --iptables=false, seen as IP
// masquerading off on its default bridge, or no default bridge at all).
//
// # Objects
//
// For an agent "coder" in a state of lineage L, Plan returns:
//
//   - agent.coder.network (kind "network"): an internal bridge network
//     named bf-<L[:8]>-coder with the bridge option
//     com.docker.network.bridge.inhibit_ipv4=true, so the bridge has no
//     host address and the docker host's own services are unreachable from
//     it, and an explicit /28 subnet taken from subnet_pool (4096 networks
//     in the default pool, not the engine's ~30 default ones). The block is
//     the first one that overlaps no network on the engine; allocation is
//     serialized within the process and retried with the next block when
//     another process takes it first. Computed: subnet, name.
//   - agent.coder.image (kind "image"), for a build block only: built
//     through the API with the classic builder from a tar of the context,
//     tagged bf-<L[:8]>-coder:<context_hash[:12]>. Plan hashes the context
//     (SHA-256 over each file's slash path, type, permission bits and
//     content or link target, in lexical order, honouring .dockerignore with
//     the engine's own pattern rules; modification times and owners are not
//     hashed), so a change to it shows in the plan. Apply hashes exactly
//     what it sends and refuses to build when that differs from the plan.
//     Computed: image_id, tag.
//   - agent.coder (kind "container", a workload): bf-<L[:8]>-coder, run with
//     an init process (stops in ~0.2 s), attached only to its network, with
//     DNS options timeout:1 attempts:1 (outside names fail in about a second
//     on an internal network instead of five), without CAP_NET_RAW, and
//     with HTTP_PROXY, HTTPS_PROXY (and lower case) pointing at its gateway
//     and NO_PROXY naming localhost and its sidecars, all added at create
//     (its attributes stay what the configuration says; "sidecars" lists
//     the sidecar names when there are any). A missing image reference is
//     pulled at apply, never at plan. cpus and memory change in place
//     (memory without extra swap); everything else replaces the container.
//     With credential blocks, "credential_env" maps their names to their
//     env, and create adds each placeholder, the trust variables and the
//     bottle's CA files (credentials.go).
//     It does not depend on its gateway. Computed: name, ip.
//   - agent.coder.sidecar.S (kind "container", a workload), one per sidecar
//     block: like the agent's container, on the same network with the
//     network alias S, and agent.coder.sidecar.S.image for a build block.
//   - agent.coder.gateway (kind "gateway", a workload), only for an agent
//     with an egress block: the egress gateway (gateway.go), "bottlefile gateway" as PID 1 of a FROM scratch image
//     imported from the gateway binary (static; tagged
//     bottlefile-gateway:<sha256>, labelled io.bottlefile.gateway-image=1,
//     removed when the last gateway using it is deleted),
//     on the agent's network at that subnet's last address (alias
//     "gateway", the only address it listens on, port 3128) and on the
//     egress network. Attributes: allow (the rules, canonical), version
//     (the binary's version and SHA-256 prefix, "v0.2.0 (3f2a9c1d4e5f)";
//     a new binary replaces the gateway), network, egress_network, dns,
//     and credentials (the agent's credential blocks, values sensitive)
//     when there are any. allow and credentials change
//     in place: the rules and credentials files are copied in, the gateway gets SIGHUP, and
//     apply waits until its log reports the new rules and credentials in force. It never
//     connects to the subnet pool, internal networks, a managed egress
//     network, the gateway address of any network on the engine, or, with
//     a local engine, this machine's addresses (-forbid).
//   - runtime.<R>.egress (kind "network"), unless the runtime names an
//     egress_network: a normal bridge bf-<L[:8]>-<R>.egress with a /24 of
//     egress_subnet_pool, shared by every gateway of the runtime (each
//     agent's plan returns it; the planner keeps one).
//
// Every object carries the labels io.bottlefile.lineage,
// io.bottlefile.address and io.bottlefile.config-hash (gateways also
// io.bottlefile.kind=gateway); Read lists each kind
// with one call filtered on the lineage label. Labels are fixed at create:
// after an in-place update Read still reports the hash the container was
// created with.
//
// # Interrupted applies
//
// Creating a container whose name is taken by one of this lineage (made by
// an apply that crashed before recording it) removes that one first; a
// network of this lineage made for the same address, as this driver makes
// them, is adopted. Objects of that name from any other lineage, or none,
// are never touched: create fails and says so.
//
// # Activity
//
// Activity (activity.go) tells idle policies when each agent was last
// used: its gateway's last proxy request (the gateway's activity stamp,
// one stat), an exec session open in it or a sidecar (inspect), CPU at or
// above CPUBusy (5 % of a core) since the last look (one-shot stats; the
// counters are kept in the state directory under activity/, so looks of
// separate runs compare), and the end of a bottlefile exec session. One
// list call per look, then two or three calls per running bottle.
package docker
