// Package nodesnap takes a snapshot of a Kubernetes container through its
// node's containerd, and pushes images to a registry by digest.
//
// The CRI has no commit: a snapshot is what `ctr snapshots diff` gives,
// the container's writable layer (rootfs.CreateDiff of the container's
// snapshot against its parent, through the node's diff service), appended
// to the layers of the container's image, with a config that is the
// image's plus the new diff_id, a history entry and bottlefile's labels.
// The layer, config and manifest are written to the node's content store
// under a lease (so the node's garbage collection frees them once the
// commit is over: the node keeps no image) and pushed to the registry by
// digest, with go-containerregistry, the one library this package pushes
// with.
//
//	Commit       a container's files → an image in the registry (by digest)
//	PushImage    tar layers + a config → an image in the registry (the gateway's)
//	Delete       a manifest out of the registry (retention)
//	List         a repository's tags and the digests they name
//	Export       an image in the registry → a docker-save tar (migration)
//	Import       a docker-save tar → an image in the registry, relabelled
//	ContainerID  a Pod status's "containerd://ID" → the id Commit takes
//	Written      the bytes a container wrote to its own layer
//
// A driver finds what Commit needs in the Pod: the node is
// Pod.Spec.NodeName (whose containerd socket the runtime configures), the
// container is ContainerID(Pod.Status.ContainerStatuses[i].ContainerID)
// of the agent's container, and the containerd namespace is the CRI's,
// "k8s.io". A snapshot resumes as a Pod whose image is
// REGISTRY/REPO@DIGEST: the node's kubelet pulls it, so the nodes must
// reach the registry as the runtime names it (a plain-HTTP registry needs
// the node's containerd to be told so, as the fixture's registry mirror).
//
// The package reaches a node's containerd by its socket (Node.Socket: a
// path, or unix://PATH), so whoever calls it must be able to reach that
// socket: on the node, or through a forwarded socket. It imports no
// Kubernetes package and no other driver.
package nodesnap
