// Package docker is bottlefile's driver for the Docker engine (API 1.41 and
// later, through github.com/docker/docker/client with version negotiation).
//
// # Runtime block
//
//	runtime "local" {
//	  driver      = "docker"
//	  host        = "unix:///var/run/docker.sock" # optional; else DOCKER_HOST
//	  subnet_pool = "10.213.0.0/16"               # optional; the default
//	}
//
// Configure only makes the client; the engine is first contacted by Read or
// Apply. Plan never contacts it at all.
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
//     on an internal network instead of five). A missing image reference is
//     pulled at apply, never at plan. cpus and memory change in place
//     (memory without extra swap); everything else replaces the container.
//     Computed: name, ip.
//
// Every object carries the labels io.bottlefile.lineage,
// io.bottlefile.address and io.bottlefile.config-hash; Read lists each kind
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
package docker
