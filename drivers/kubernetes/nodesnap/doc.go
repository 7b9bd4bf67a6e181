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
//	Commit      a container's files → an image in the registry (by digest)
//	PushImage   tar layers + a config → an image in the registry (the gateway's)
//	Delete      a manifest out of the registry (retention)
//	List        a repository's tags and the digests they name
//
// The package reaches a node's containerd by its socket (Node.Socket: a
// path, or unix://PATH), so whoever calls it must be able to reach that
// socket: on the node, or through a forwarded socket. It imports no
// Kubernetes package and no other driver.
package nodesnap
