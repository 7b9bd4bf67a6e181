package swarm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
)

// Activity (issue 31) on a swarm: an agent's use is read where its tasks
// run. The manager says which services an agent has (its own, its
// sidecars', its gateway's), which task of each runs and on which node;
// each node's engine (node_hosts, nodes.go) is then asked about the task
// containers it runs, as the docker driver looks at its own containers
// (engine.Driver ContainerActivity: a stat of the gateway's activity
// stamp, a workload's open exec sessions and its CPU since the last look,
// remembered per node under the state directory), and the uses of an
// agent's containers, wherever they run, are merged (engine.Merge). One
// look costs three calls to the manager (services, their tasks, nodes)
// and, per node, what the docker driver's look costs per container.
//
// A workload stopped (scaled to no replicas) was last used when it was
// scaled, as far as its service's update time tells; one whose task is
// not running (being placed, restarting) when its task got there. A node
// whose engine cannot be reached leaves its agents' LastActive zero
// (never idle), with a warning: it never fails the look, as a manager
// that cannot be reached does.

var _ drivers.ActivityReader = (*Driver)(nil)

// Activity reports, per asked agent the swarm runs services of, when it
// was last used and whether it is busy now (see above).
func (d *Driver) Activity(ctx context.Context, req drivers.ActivityRequest) (map[string]drivers.Activity, error) {
	return reached(d, d.activity)(ctx, req)
}

func (d *Driver) activity(ctx context.Context, req drivers.ActivityRequest) (map[string]drivers.Activity, error) {
	if req.Lineage == "" || len(req.Agents) == 0 {
		return map[string]drivers.Activity{}, nil
	}
	api, err := d.manager(ctx)
	if err != nil {
		return nil, err
	}
	asked := map[string]bool{}
	for _, a := range req.Agents {
		asked[a] = true
	}
	services, err := api.ServiceList(ctx, swarm.ServiceListOptions{Filters: byLineage(req.Lineage)})
	if err != nil {
		return nil, fmt.Errorf("listing services of lineage %s: %w", req.Lineage, err)
	}
	type watched struct {
		svc     swarm.Service
		agent   string
		gateway bool
	}
	var ws []watched
	tf := filters.NewArgs()
	for _, s := range services {
		a, err := addrs.Parse(s.Spec.Labels[drivers.LabelAddress])
		if err != nil {
			continue
		}
		agent, ok := addrs.AgentOf(a.String())
		if !ok || !asked[agent.String()] {
			continue
		}
		w := watched{svc: s, agent: agent.String(), gateway: s.Spec.Labels[labelKind] == kindGateway}
		if !w.gateway && a.Kind() != addrs.AgentKind && a.Kind() != addrs.SidecarKind {
			continue // not a workload
		}
		ws = append(ws, w)
		tf.Add("service", s.ID)
	}
	if len(ws) == 0 {
		return map[string]drivers.Activity{}, nil
	}
	list, err := api.TaskList(ctx, swarm.TaskListOptions{Filters: tf})
	if err != nil {
		return nil, fmt.Errorf("listing the tasks of lineage %s: %w", req.Lineage, err)
	}
	tasks := map[string][]swarm.Task{}
	for _, t := range list {
		tasks[t.ServiceID] = append(tasks[t.ServiceID], t)
	}
	nodeList, err := api.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	hostnames := map[string]string{}
	for _, n := range nodeList {
		hostnames[n.ID] = n.Description.Hostname
	}

	var uses []engine.Use
	onNode := map[string][]engine.Watched{}
	for _, w := range ws {
		s := w.svc
		if r := s.Spec.Mode.Replicated; r != nil && r.Replicas != nil && *r.Replicas == 0 {
			if !w.gateway {
				// Stopped (StopWorkload scales to none): last used
				// when it was scaled.
				uses = append(uses, engine.Use{Agent: w.agent, Last: s.UpdatedAt})
			}
			continue
		}
		t, ok := currentTask(tasks[s.ID])
		running := ok && t.Status.State == swarm.TaskStateRunning && t.Status.ContainerStatus != nil && t.Status.ContainerStatus.ContainerID != ""
		switch {
		case running:
			node := hostnames[t.NodeID]
			if node == "" {
				node = t.NodeID
			}
			// A node reads CPU only when its own cheap signals do not
			// show a use since IdleSince: a use on another node does not
			// spare it, which costs a read, never a wrong answer.
			onNode[node] = append(onNode[node], engine.Watched{Agent: w.agent, ID: t.Status.ContainerStatus.ContainerID, Gateway: w.gateway, IdleSince: req.IdleSince[w.agent]})
		case w.gateway:
			// A gateway that is not running passes no request: it
			// tells nothing.
		case ok:
			uses = append(uses, engine.Use{Agent: w.agent, Last: t.Status.Timestamp})
		default:
			uses = append(uses, engine.Use{Agent: w.agent, Last: s.UpdatedAt})
		}
	}

	runtime := d.runtimeName()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, node := range slices.Sorted(maps.Keys(onNode)) {
		ctrs := onNode[node]
		wg.Go(func() {
			got := d.lookOnNode(ctx, runtime, node, ctrs)
			mu.Lock()
			uses = append(uses, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return engine.Merge(uses), nil
}

// lookOnNode asks the engine of node about the containers it runs, under
// a memory of that node's; a node that cannot be reached, or fails to
// answer, makes them unknown, with a warning.
func (d *Driver) lookOnNode(ctx context.Context, runtime, node string, ctrs []engine.Watched) []engine.Use {
	unknown := func(err error) []engine.Use {
		agents := map[string]bool{}
		for _, c := range ctrs {
			agents[c.Agent] = true
		}
		d.log.Warn("cannot read the activity of the agents a node runs: they are not found idle until it can be read",
			"node", node, "agents", slices.Sorted(maps.Keys(agents)), "error", err)
		out := make([]engine.Use, 0, len(ctrs))
		for _, c := range ctrs {
			out = append(out, engine.Use{Agent: c.Agent, Gateway: c.Gateway, Unknown: true})
		}
		return out
	}
	eng, host, err := d.nodeEngine(ctx, node)
	if err != nil {
		return unknown(err)
	}
	// The first look at a container samples its CPU over a second or
	// two, a few containers at a time: bounded as a commit is.
	b := d.bound(ctx, "node "+node, commitBounds*d.nodeTimeout())
	got, err := eng.ContainerActivity(b.ctx, "swarm-"+runtime+"-"+node, ctrs)
	b.release()
	if err != nil {
		return unknown(nodeFailed(node, host, b.err(err)))
	}
	return got
}
