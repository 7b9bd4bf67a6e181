package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/kubernetes/nodesnap"
)

// Snapshots (drivers.KindSnapshot) of an agent on a cluster live in the
// runtime's registry, where every node can pull them, by digest:
//
//	REGISTRY/<namespace of the agent's bottle>-snap@sha256:...
//
// which is the snapshot's id and what a workload boots from (BootImage:
// the agent's Pod runs that image). The CRI has no commit: taking one
// commits the agent container's writable layer through the containerd
// of the node its Pod runs on (the runtime's node_containerd names each
// node's socket), over the image the Pod runs (nodesnap.Commit); the
// node keeps nothing of it.
//
// Each snapshot is indexed in the cluster as a ConfigMap in the lineage's
// snapshot namespace, <prefix><lineage[:8]>-snapshots, which outlives the
// bottles (destroy removes a bottle's namespace; its snapshots stay to
// resume from): labelled with the lineage and role "snapshot", annotated
// with the snapshot's address, configuration hash and runtime, holding
// the reference and what was recorded of it. Read lists them with the
// one ConfigMap list it makes anyway, and never needs the registry.
// Deleting a snapshot deletes its manifest from the registry
// (nodesnap.Delete: the registry must allow deletes), then its ConfigMap,
// and the snapshot namespace once it holds no snapshot. The namespace
// carries no lineage label (Read would take it for a bottle), only an
// annotation.
//
// Without a registry and the node's containerd there are no snapshots.

// roleSnapshot is the role label of a snapshot's index ConfigMap.
const roleSnapshot = "snapshot"

// annotLineage marks the snapshot namespace's lineage (an annotation:
// a label would make Read take it for a bottle).
const annotLineage = drivers.LabelPrefix + "snapshots-of"

// Keys of a snapshot index ConfigMap's data.
const (
	dataImage   = "image"
	dataSize    = "size"
	dataCreated = "created"
	dataSource  = "source"
	dataAgent   = "agent"
	dataNode    = "node"
)

// commit is nodesnap.Commit; a variable so that the index's tests, with
// no node, can stand in for it (nodesnap's own tests run the real one).
var commit = nodesnap.Commit

func init() {
	applyOps[drivers.KindSnapshot] = map[drivers.Op]applyOp{
		drivers.OpCreate: (*Driver).createSnapshot,
		drivers.OpDelete: (*Driver).deleteSnapshot,
	}
}

// snapshotsNamespace is the namespace of a lineage's snapshot index.
func snapshotsNamespace(prefix, lineage string) (string, error) {
	lp := drivers.LineagePrefix(lineage)
	if lp == "" {
		return "", errors.New("no lineage to name the snapshot namespace by")
	}
	return prefix + lp + "-snapshots", nil
}

// snapshotIndexName is the ConfigMap of the snapshot at addr.
func snapshotIndexName(addr string) string {
	name := "snap-" + engine.FoldLabel(addr)
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

// registryRepo splits the runtime's registry (HOST[:PORT][/PATH]) into the
// registry and the repository name under it.
func registryRepo(registry, name string) (nodesnap.Registry, string) {
	host, path, _ := strings.Cut(registry, "/")
	if path != "" {
		name = strings.Trim(path, "/") + "/" + name
	}
	// The runtime's registry is one the nodes pull from as it is named,
	// plain HTTP allowed (as the gateway image's push).
	return nodesnap.Registry{Host: host, PlainHTTP: true}, name
}

// splitSnapshotRef splits a snapshot's reference (REGISTRY/REPO@DIGEST)
// made under the runtime's registry into its repository and digest.
func splitSnapshotRef(registry, ref string) (nodesnap.Registry, string, string, error) {
	repoRef, digest, ok := strings.Cut(ref, "@")
	host, _, _ := strings.Cut(registry, "/")
	name, under := strings.CutPrefix(repoRef, host+"/")
	if !ok || !under || name == "" {
		return nodesnap.Registry{}, "", "", fmt.Errorf("%q is not a snapshot in the runtime's registry %s (REGISTRY/REPOSITORY@DIGEST)", ref, registry)
	}
	return nodesnap.Registry{Host: host, PlainHTTP: true}, name, digest, nil
}

// snapshotAgentAddr is the agent a snapshot object is of.
func snapshotAgentAddr(req drivers.ApplyRequest) (string, error) {
	agentAddr, err := drivers.String(req.Object.Attr("agent"))
	if err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	if agentAddr == "" && req.Agent != nil {
		agentAddr = req.Agent.Addr
	}
	if agentAddr == "" {
		return "", errors.New("no agent named to commit")
	}
	return agentAddr, nil
}

// createSnapshot commits the agent's container through its node's
// containerd, pushes it to the registry by digest and indexes it.
func (d *Driver) createSnapshot(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	fail := func(format string, args ...any) (drivers.ApplyResponse, error) {
		return drivers.ApplyResponse{}, fmt.Errorf("taking snapshot %s: %s", addr, fmt.Sprintf(format, args...))
	}
	if cfg.registry == "" {
		return fail("snapshots on a cluster live in a registry every node pulls from, and runtime %q has none: set registry in the runtime block", cfg.runtime)
	}
	agentAddr, err := snapshotAgentAddr(req)
	if err != nil {
		return fail("%v", err)
	}
	ns, err := namespaceName(cfg.prefix, req.Lineage, req.NamedAddr(agentAddr))
	if err != nil {
		return fail("%v", err)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, podName(agentAddr), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fail("the agent %s has no Pod (%s/%s) to commit", agentAddr, ns, podName(agentAddr))
		}
		return fail("reading the agent's Pod: %v", err)
	}
	node := p.Spec.NodeName
	socket := cfg.containerd[node]
	if node == "" || socket == "" {
		return fail("the agent's Pod runs on node %q, and the runtime's node_containerd names no containerd for it: snapshots are taken through the node's containerd", node)
	}
	if len(p.Spec.Containers) == 0 {
		return fail("the agent's Pod has no container")
	}
	main := p.Spec.Containers[0].Name
	var statusID string
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == main {
			statusID = st.ContainerID
		}
	}
	ctrID, err := nodesnap.ContainerID(statusID)
	if err != nil {
		return fail("the agent's container: %v", err)
	}
	reg, repo := registryRepo(cfg.registry, ns+"-snap")
	ref := nodesnap.Ref{Registry: reg, Repo: repo, Lineage: req.Lineage, Agent: agentAddr, Address: addr}
	start := time.Now()
	digest, size, err := commit(ctx, nodesnap.Node{Socket: socket, Namespace: nodesnap.DefaultNamespace}, ctrID, ref)
	if err != nil {
		return fail("through node %s's containerd: %v", node, err)
	}
	image := reg.Host + "/" + repo + "@" + digest
	snap := drivers.SnapshotResult{Image: image, Size: size, Created: time.Now().UTC(), Source: ctrID}
	if err := d.indexSnapshot(ctx, cs, cfg, req, agentAddr, node, snap); err != nil {
		return fail("%v", err)
	}
	d.log.Info("took snapshot", "addr", addr, "node", node, "ref", image, "elapsed", time.Since(start))
	return drivers.ApplyResponse{ID: image, Snapshot: &snap, Computed: map[string]string{drivers.ComputedNode: node}}, nil
}

// indexSnapshot records a snapshot as a ConfigMap in the lineage's
// snapshot namespace, making the namespace when it is not there.
func (d *Driver) indexSnapshot(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest, agentAddr, node string, snap drivers.SnapshotResult) error {
	ns, err := snapshotsNamespace(cfg.prefix, req.Lineage)
	if err != nil {
		return err
	}
	want := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{annotLineage: req.Lineage}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("making the snapshot namespace %s: %w", ns, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotIndexName(req.Object.Addr), Namespace: ns, Labels: objectLabels(req, roleSnapshot), Annotations: objectAnnotations(req)},
		Data: map[string]string{
			dataImage:   snap.Image,
			dataSize:    strconv.FormatInt(snap.Size, 10),
			dataCreated: snap.Created.Format(time.RFC3339Nano),
			dataSource:  snap.Source,
			dataAgent:   agentAddr,
			dataNode:    node,
		},
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// What an earlier, cut-off take of the same address left.
		_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("recording it in %s: %w", ns, err)
	}
	return nil
}

// deleteSnapshot deletes the snapshot's manifest from the registry, its
// index, and the snapshot namespace once it holds none.
func (d *Driver) deleteSnapshot(ctx context.Context, cs k8s.Interface, cfg settings, req drivers.ApplyRequest) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	if req.ID != "" {
		if cfg.registry == "" {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: runtime %q has no registry to delete %s from", addr, cfg.runtime, req.ID)
		}
		reg, repo, digest, err := splitSnapshotRef(cfg.registry, req.ID)
		if err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: %w", addr, err)
		}
		if err := nodesnap.Delete(ctx, reg, repo, digest); err != nil {
			return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: %w", addr, err)
		}
	}
	ns, err := snapshotsNamespace(cfg.prefix, req.Lineage)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: %w", addr, err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, snapshotIndexName(addr), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return drivers.ApplyResponse{}, fmt.Errorf("deleting snapshot %s: its record in %s: %w", addr, ns, err)
	}
	left, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: labelRole + "=" + roleSnapshot})
	if err == nil && len(left.Items) == 0 {
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			d.log.Warn("could not remove the empty snapshot namespace", "namespace", ns, "error", err)
		}
	}
	d.log.Info("deleted snapshot", "addr", addr, "ref", req.ID)
	return drivers.ApplyResponse{}, nil
}

// snapshotObject is the live snapshot a ConfigMap of the index records;
// false for any other ConfigMap.
func (d *Driver) snapshotObject(cm *corev1.ConfigMap) (drivers.LiveObject, bool) {
	if cm.Labels[labelRole] != roleSnapshot {
		return drivers.LiveObject{}, false
	}
	image := cm.Data[dataImage]
	if image == "" {
		d.log.Warn("a snapshot record of this lineage names no image; ignoring it", "configmap", cm.Namespace+"/"+cm.Name)
		return drivers.LiveObject{}, false
	}
	o, ok := d.live(cm.ObjectMeta, drivers.KindSnapshot, image, image)
	if !ok {
		return o, false
	}
	if t, err := time.Parse(time.RFC3339Nano, cm.Data[dataCreated]); err == nil {
		o.Created = t
	}
	return o, true
}

// ExportSnapshot writes a snapshot as a docker-save tar stream, read from
// the registry.
func (d *Driver) ExportSnapshot(ctx context.Context, ref string, w io.Writer) error {
	_, cfg, err := d.client()
	if err != nil {
		return err
	}
	reg, repo, digest, err := splitSnapshotRef(cfg.registry, ref)
	if err != nil {
		return fmt.Errorf("exporting snapshot: %w", err)
	}
	if err := nodesnap.Export(ctx, reg, repo, digest, w); err != nil {
		return fmt.Errorf("exporting snapshot %s: %w", ref, err)
	}
	return nil
}

// ImportSnapshot takes a docker-save tar stream in as the snapshot
// req.Object: pushed to the registry by digest with this lineage's labels,
// and indexed.
func (d *Driver) ImportSnapshot(ctx context.Context, req drivers.ImportRequest, r io.Reader) (drivers.ApplyResponse, error) {
	addr := req.Object.Addr
	cs, cfg, err := d.client()
	if err != nil {
		return drivers.ApplyResponse{}, err
	}
	if cfg.registry == "" {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: runtime %q has no registry to keep it in", addr, cfg.runtime)
	}
	areq := drivers.ApplyRequest{Lineage: req.Lineage, Object: req.Object, Hash: req.Hash, Runtime: cfg.runtime}
	agentAddr, err := snapshotAgentAddr(areq)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: %w", addr, err)
	}
	ns, err := namespaceName(cfg.prefix, req.Lineage, agentAddr)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: %w", addr, err)
	}
	reg, repo := registryRepo(cfg.registry, ns+"-snap")
	labels := map[string]string{drivers.LabelLineage: req.Lineage, drivers.LabelAddress: addr, nodesnap.LabelSnapshotOf: agentAddr}
	digest, err := nodesnap.Import(ctx, reg, repo, "", r, labels)
	if err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: %w", addr, err)
	}
	snap := drivers.SnapshotResult{Image: reg.Host + "/" + repo + "@" + digest, Size: -1, Created: time.Now().UTC()}
	if err := d.indexSnapshot(ctx, cs, cfg, areq, agentAddr, "", snap); err != nil {
		return drivers.ApplyResponse{}, fmt.Errorf("importing snapshot %s: %w", addr, err)
	}
	d.log.Info("imported snapshot", "addr", addr, "ref", snap.Image)
	return drivers.ApplyResponse{ID: snap.Image, Snapshot: &snap}, nil
}

// written is nodesnap.Written; a variable for the tests with no node.
var written = nodesnap.Written

// Written reports how much a Pod's container wrote to its own layer,
// measured through its node's containerd, and when its Pod was made, so a
// plan can say what a replace or destroy would discard. It only reads. A
// node the runtime names no containerd for is unmeasured, saying so.
func (d *Driver) Written(ctx context.Context, lineage string, obj drivers.LiveObject) (drivers.Written, error) {
	if obj.Kind != kindPod {
		return drivers.Written{}, nil
	}
	cs, cfg, err := d.client()
	if err != nil {
		return drivers.Written{}, err
	}
	ns, name, ok := strings.Cut(obj.Name, "/")
	if !ok {
		if ns, err = namespaceName(cfg.prefix, lineage, obj.Addr); err != nil {
			return drivers.Written{}, err
		}
		name = podName(obj.Addr)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return drivers.Written{}, d.unreachable(fmt.Errorf("reading what %s wrote: %w", obj.Addr, err))
	}
	w := drivers.Written{Since: p.CreationTimestamp.UTC()}
	socket := cfg.containerd[p.Spec.NodeName]
	if socket == "" || len(p.Spec.Containers) == 0 {
		w.Unmeasured = fmt.Sprintf("the runtime's node_containerd names no containerd for node %q, where it runs", p.Spec.NodeName)
		return w, nil
	}
	var statusID string
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == p.Spec.Containers[0].Name {
			statusID = st.ContainerID
		}
	}
	id, err := nodesnap.ContainerID(statusID)
	if err != nil {
		w.Unmeasured = err.Error()
		return w, nil
	}
	if w.Bytes, err = written(ctx, nodesnap.Node{Socket: socket, Namespace: nodesnap.DefaultNamespace}, id); err != nil {
		return drivers.Written{}, fmt.Errorf("reading what %s wrote, through node %s's containerd: %w", obj.Addr, p.Spec.NodeName, err)
	}
	return w, nil
}

var (
	_ drivers.SnapshotExporter = (*Driver)(nil)
	_ drivers.SnapshotImporter = (*Driver)(nil)
	_ drivers.WrittenReader    = (*Driver)(nil)
)
