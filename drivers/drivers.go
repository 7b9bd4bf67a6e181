package drivers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/zclconf/go-cty/cty"
)

// Labels every object bottlefile creates carries, so that refresh finds it
// with one filtered list call and nothing it made can leak unnoticed.
const (
	// LabelPrefix begins every label bottlefile sets: the one place it is
	// spelled. A label under it is bottlefile's own (a snapshot does not
	// inherit it, drift ignores it); any other is the user's.
	LabelPrefix     = "io.bottlefile."
	LabelLineage    = LabelPrefix + "lineage"
	LabelAddress    = LabelPrefix + "address"
	LabelConfigHash = LabelPrefix + "config-hash"
	// LabelRuntime names the runtime block that made the object, so that
	// two runtime blocks on one engine tell their objects apart. Objects
	// made before it existed lack it: the state's records attribute them.
	LabelRuntime = LabelPrefix + "runtime"
)

// EngineIdentifier is implemented by drivers that can say which engine a
// configured runtime reaches (docker: the engine's ID; swarm: the
// cluster's ID; smolvm: the host and its data directory). Two runtimes of
// one identity are one engine: refresh reads it once and attributes its
// objects to the runtimes by their runtime label and recorded ids, and an
// agent moved between them is moved in the state, not migrated. "" means
// the driver cannot tell; such a runtime is an engine of its own.
type EngineIdentifier interface {
	EngineID(ctx context.Context) (string, error)
}

// Driver owns one kind of runtime. The core calls Declare to decode the
// runtime block and check agents, Configure once per runtime, then Read,
// Plan and Apply.
type Driver interface {
	// Name is the value of a runtime block's driver attribute ("docker").
	Name() string
	// Declare says what the driver's blocks hold and what it can do. It
	// needs no Configure and contacts nothing: validate calls it.
	Declare() Declaration
	// Configure connects the driver to one runtime. It must not change anything
	// on the runtime.
	Configure(ctx context.Context, req ConfigureRequest) error
	// Read lists every object on the runtime that carries the lineage label,
	// with one list call per object kind.
	Read(ctx context.Context, req ReadRequest) (ReadResponse, error)
	// Plan expands one agent into the objects the driver would create for it.
	// It must not change anything on the runtime: no create, pull or build.
	Plan(ctx context.Context, req PlanRequest) (PlanResponse, error)
	// Apply performs one operation on one object.
	Apply(ctx context.Context, req ApplyRequest) (ApplyResponse, error)
}

// Closer is implemented by drivers that hold connections.
type Closer interface {
	Close() error
}

// BottleForgetter is implemented by drivers that keep files of a bottle
// outside the runtime (docker: the bottle's CA for credential injection,
// key included, under the state directory). After an apply or destroy,
// each runtime's driver is asked to forget every bottle of which the
// state no longer records anything but snapshots, so those files go with
// the bottle. Forgetting a bottle the driver keeps nothing of is no error.
type BottleForgetter interface {
	ForgetBottle(lineage, agent string) error
}

// Factory makes an unconfigured driver. It contacts nothing: validate
// calls it to read the driver's Declaration.
type Factory func(log hclog.Logger) (Driver, error)

// Registry maps a driver name to its factory. cmd/bottlefile builds it.
type Registry map[string]Factory

// AgentSetting names, in order, the drivers whose agents take the
// per-agent setting name (Schema.Agent): what an agent's driver block
// needs when its own driver lacks the setting ("placement": swarm). It
// makes each driver unconfigured, as validate does.
func (r Registry) AgentSetting(name string) []string {
	var out []string
	for driver, factory := range r {
		d, err := factory(nil)
		if err != nil {
			continue
		}
		if _, ok := d.Declare().Schema.Agent[name]; ok {
			out = append(out, driver)
		}
	}
	slices.Sort(out)
	return out
}

// ConfigureRequest carries one decoded runtime block.
type ConfigureRequest struct {
	// Runtime is the runtime block's name ("default" for the implicit one).
	Runtime string
	// Config is the runtime block decoded against Declare().Schema.Runtime.
	Config cty.Value
	// StateDir is the directory holding the state (.bottlefile), for drivers
	// that keep files of their own there.
	StateDir string
	// Dir is the Bottlefile's directory: relative paths in the runtime
	// block (tls_ca, ...) are relative to it. Empty means the working
	// directory.
	Dir string
}

// ReadRequest asks for everything of one lineage.
type ReadRequest struct {
	Lineage string
	// Sizes asks for each workload's Written as well, which costs the
	// runtime more (docker measures every container's layer, and only on
	// a storage driver that does so cheaply): status asks, plan does not.
	Sizes bool
	// NoConfig leaves out what each object holds in force
	// (LiveObject.Config, read from inside a gateway): a destroy's
	// refresh, which updates nothing, does not ask (issue 28).
	NoConfig bool
}

// ReadResponse lists what is live on the runtime.
type ReadResponse struct {
	Objects []LiveObject
}

// LiveObject is what the runtime reports about one object bottlefile made.
// Drift is judged on these few facts, never on every field the engine fills in.
type LiveObject struct {
	Addr string // from the address label
	Kind string
	ID   string
	Name string // for a snapshot, what a workload boots from (its image)
	Hash string // from the config-hash label
	// Runtime is the runtime label: the runtime block that made it; ""
	// for objects made before bottlefile labelled it.
	Runtime string `json:",omitempty"`
	Running bool   // workloads only
	ImageID string // workloads only
	// Unfinished marks an object an apply was cut off while setting up
	// (a gateway made and never started may lack its rules): it is
	// replaced, never adopted or started.
	Unfinished bool
	// Leftover says, for an object of the lineage that no record can be
	// (an untagged snapshot image, a snapshot's intermediate image a
	// killed apply left), what it is: the plan removes it by its id,
	// saying so. "" for every object a record may be.
	Leftover string `json:",omitempty"`

	// Workloads only, from the same list call, as far as the runtime
	// reports them (zero values when it does not):
	//
	// State is the runtime's own word: docker's "created" (never
	// started), "running", "exited", "paused", "restarting", "dead";
	// smolvm's "created", "running", "stopped", "failed".
	State string `json:",omitempty"`
	// ExitCode is the code of the last run, when State is "exited".
	ExitCode int `json:",omitempty"`
	// Created is when the workload was made; Started when it last started
	// and Finished when it last stopped (zero while running or never
	// started). A runtime whose list gives times only as "Up 5 minutes"
	// (docker) reports them to the unit it names.
	Created  time.Time `json:",omitzero"`
	Started  time.Time `json:",omitzero"`
	Finished time.Time `json:",omitzero"`
	// Written is what the workload wrote to its own filesystem, in bytes,
	// when ReadRequest.Sizes asked and the runtime tells; nil otherwise.
	Written *int64 `json:",omitempty"`

	// Node is the machine the workload runs on (or last ran on), on a
	// runtime of several (a swarm's node name); "" on one of a single
	// machine.
	Node string `json:",omitempty"`
	// Drift says in words how the object was changed outside bottlefile
	// since it was made, when the runtime can tell ("it was scaled to 3
	// replicas outside bottlefile"); the planner replaces it, saying so.
	// "" when it was not, or the runtime cannot tell.
	Drift string `json:",omitempty"`

	// Instance is, on a runtime that starts new instances of a workload
	// by itself (a swarm task the cluster placed again when its node went
	// down or was drained, or started again when it failed), the
	// runtime's id of the instance that runs now; "" elsewhere. A driver
	// that reports it records the instance it started as the computed
	// value ComputedInstance (and its node as ComputedNode): the planner
	// tells an instance the runtime started by itself, which has lost
	// what the earlier one wrote, from one bottlefile started.
	Instance string `json:",omitempty"`
	// Restarted says, in words, why the runtime started the running
	// instance in place of an earlier one ("node2 is down"), when the
	// runtime says; "" otherwise.
	Restarted string `json:",omitempty"`

	// Exit says how a workload that ran and is not running came to stop;
	// nil for one running or never started, or when the runtime cannot say.
	Exit *Exit

	// Config is, for an object that holds configuration outside what its
	// labels say and takes changes of it in place (a gateway's rules and
	// credentials files), the digest of each part it holds, as the object
	// itself reports it, in LiveConfig's form ("credentials=HEX
	// rules=HEX"). A driver that reports it records the digests of what it
	// applied as the computed values ComputedConfigPrefix+part; the planner
	// updates an object whose part in force differs from the one recorded,
	// saying so. "" when the runtime cannot tell.
	Config string `json:",omitempty"`
}

// LiveConfig is the LiveObject.Config of parts: "part=digest" for each,
// sorted, space-separated.
func LiveConfig(parts map[string]string) string {
	keys := slices.Sorted(maps.Keys(parts))
	for i, k := range keys {
		keys[i] = k + "=" + parts[k]
	}
	return strings.Join(keys, " ")
}

// LiveConfigParts reads a LiveObject.Config back into its parts.
func LiveConfigParts(s string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}

// Computed values of a workload the core reads (ApplyResponse.Computed,
// as the state records them).
const (
	// ComputedInstance is the instance a driver started (LiveObject.Instance).
	ComputedInstance = "instance"
	// ComputedNode is the node it started it on, on a runtime of several.
	ComputedNode = "node"
	// ComputedConfigPrefix, followed by a part's name, is the digest of
	// that part of the configuration applied (LiveObject.Config).
	ComputedConfigPrefix = "config:"
)

// Workload states LiveObject.State may hold that the core acts on.
const (
	StateCreated = "created" // made, never started
	StateRunning = "running"
	StateExited  = "exited" // docker's word; smolvm says "stopped"
)

// PlanRequest asks a driver to expand one agent.
type PlanRequest struct {
	Agent AgentSpec
}

// PlanResponse lists the objects an agent needs, in no particular order.
type PlanResponse struct {
	Objects []Object
}

// Object is one thing a driver creates for an agent: what the plan shows,
// diffs and records.
type Object struct {
	// Addr is stable across runs: "agent.coder", "agent.coder.network".
	Addr string
	// Kind is driver-defined: "network", "container", "image".
	Kind string
	// Attrs is the desired configuration. Values may be unknown at plan time
	// and may carry the sensitive mark; the core hashes, diffs and redacts them.
	Attrs map[string]cty.Value
	// InPlace names the attributes that can change without replacing the object.
	InPlace []string
	// DependsOn lists addresses of objects that must exist first.
	DependsOn []string
	// Workload marks objects that run and can be stopped (containers, VMs).
	Workload bool
}

// Attr is one of the object's desired attributes, a null when it is
// missing, so that the decode helpers give their zero value.
func (o Object) Attr(name string) cty.Value {
	v, ok := o.Attrs[name]
	if !ok || v == cty.NilVal {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return v
}

// Labelled is the live object a runtime object with these labels is;
// false, with a warning, when it lacks the address label that says which
// object it is.
func Labelled(log hclog.Logger, labels map[string]string, kind, id, name string) (LiveObject, bool) {
	addr := labels[LabelAddress]
	if addr == "" {
		log.Warn("object with this lineage has no address label; ignoring it", "kind", kind, "id", id, "name", name)
		return LiveObject{}, false
	}
	return LiveObject{Addr: addr, Kind: kind, ID: id, Name: name, Hash: labels[LabelConfigHash], Runtime: labels[LabelRuntime]}, true
}

// SortLive orders a Read's objects by address, then kind.
func SortLive(objs []LiveObject) {
	slices.SortStableFunc(objs, func(a, b LiveObject) int {
		if c := strings.Compare(a.Addr, b.Addr); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
}

// Op is one operation Apply performs.
type Op string

const (
	OpCreate Op = "create"
	OpUpdate Op = "update"
	OpStart  Op = "start"
	OpDelete Op = "delete"
)

// ApplyRequest asks for one operation on one object.
type ApplyRequest struct {
	Op      Op
	Lineage string
	// Object is the desired object (create, update, start). For delete only
	// Addr and Kind are set.
	Object Object
	// Hash is the desired configuration hash, to be put on the object's label.
	Hash string
	// ID is the runtime's id of the existing object (update, start, delete).
	ID string
	// Agent is the evaluated agent the object belongs to. It is set for a
	// snapshot create: the agent it is taken of. A snapshot holds none of
	// the agent's declared config (that is applied again to a workload
	// created from it), and nothing sensitive.
	Agent *AgentSpec
	// BootImage, for a workload create, is the snapshot to boot from
	// instead of the configured image (resume, migration): the Image of
	// what a snapshot create returned. Empty means the configured image.
	BootImage string
	// Carry, for a workload create, is the workspace carried into the
	// new workload before it starts; nil for none.
	Carry *Carry
	// Runtime is the runtime block the operation is for, put on what a
	// create makes (LabelRuntime).
	Runtime string
	// NameAddr, when set, is the agent address the engine names of the
	// object's bottle derive from, in place of its own agent address: an
	// agent moved to another address (a moved block, state mv) keeps the
	// names its objects were made with, since an engine cannot rename
	// all of them (docker cannot rename a network, and the agent's proxy
	// setting names its gateway). A new agent given a name another
	// bottle's objects still carry gets a fresh one the same way.
	NameAddr string
	// RuntimeNameAddr, when set, is the runtime address (runtime.NAME)
	// the engine names of the runtime's own objects (its egress network)
	// derive from, in place of the runtime's own: a runtime block renamed
	// on the same engine keeps them.
	RuntimeNameAddr string
}

// Carry is what a workload create copies into the new workload before it
// starts: the agent's workspace paths, with owners, modes and symlinks,
// from a snapshot (Image: what a snapshot create returned) or from the
// workload it replaces (Workload: its runtime id, still there: the
// driver stops it and moves it out of the way first, and the delete that
// follows removes it).
type Carry struct {
	Paths    []string
	Image    string
	Workload string
}

// Labels are the labels the object carries on its runtime: its lineage,
// address, desired configuration hash and runtime.
func (r ApplyRequest) Labels() map[string]string {
	labels := map[string]string{
		LabelLineage:    r.Lineage,
		LabelAddress:    r.Object.Addr,
		LabelConfigHash: r.Hash,
	}
	if r.Runtime != "" {
		labels[LabelRuntime] = r.Runtime
	}
	return labels
}

// NamedAddr is the address the engine names of the object at addr derive
// from: addr itself, or, for an object of a bottle whose names derive
// from another agent address (NameAddr), addr with its agent part
// replaced by that one.
func (r ApplyRequest) NamedAddr(addr string) string {
	if strings.HasPrefix(addr, "runtime.") {
		return NamedAddr(r.RuntimeNameAddr, addr)
	}
	return NamedAddr(r.NameAddr, addr)
}

// NamedAddr is ApplyRequest.NamedAddr for a bottle (or runtime) named
// after nameAddr: addr with its agent.NAME (runtime.NAME) part replaced.
func NamedAddr(nameAddr, addr string) string {
	if nameAddr == "" {
		return addr
	}
	parts := strings.SplitN(addr, ".", 3)
	if len(parts) < 2 || (parts[0] != "agent" && parts[0] != "runtime") || !strings.HasPrefix(nameAddr, parts[0]+".") {
		return addr
	}
	rest := ""
	if len(parts) == 3 {
		rest = "." + parts[2]
	}
	return nameAddr + rest
}

// ApplyResponse reports what the runtime assigned.
type ApplyResponse struct {
	ID string
	// Computed holds values known only after apply (address, subnet, image id).
	Computed map[string]string
	// Snapshot is what a snapshot create (or an import) made; nil for
	// other objects. The state records it with Computed
	// (RecordComputed).
	Snapshot *SnapshotResult
	// Notes are what apply shows the user about the step, beside its
	// progress ("closed 1 open tunnel the new allowlist no longer allows").
	Notes []string
}

// LineagePrefix is the short form of a lineage drivers put in the names of
// what they make, so that two checkouts (two lineages) never collide on one
// runtime: its first eight letters and digits, lower-cased.
func LineagePrefix(lineage string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(lineage) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			if b.Len() == 8 {
				break
			}
		}
	}
	return b.String()
}

// UnreachableError says that a runtime's engine (or VM manager) cannot be
// reached at all: nothing about any one object. The planner reports it
// once per runtime, however many objects the runtime holds.
type UnreachableError struct {
	Runtime string // the runtime block's name
	Address string // where it was looked for, as the user would set it ("DOCKER_HOST=tcp://...")
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("runtime %q cannot be reached at %s: %v", e.Runtime, e.Address, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// AttributeError says what is wrong with one attribute of a runtime block:
// validate and plan show it on that attribute's line.
type AttributeError struct {
	Attribute string // "tls_ca"
	Err       error
}

func (e *AttributeError) Error() string { return e.Attribute + ": " + e.Err.Error() }

func (e *AttributeError) Unwrap() error { return e.Err }
