package swarm

import (
	"context"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// swarmAPI is the part of the engine API the driver calls on the manager
// (besides what the docker driver calls for it). The docker driver's
// client satisfies it.
type swarmAPI interface {
	Info(ctx context.Context) (system.Info, error)

	ServiceCreate(ctx context.Context, service swarm.ServiceSpec, options swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error)
	ServiceInspectWithRaw(ctx context.Context, serviceID string, opts swarm.ServiceInspectOptions) (swarm.Service, []byte, error)
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
	ServiceUpdate(ctx context.Context, serviceID string, version swarm.Version, service swarm.ServiceSpec, options swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error)
	ServiceRemove(ctx context.Context, serviceID string) error
	TaskList(ctx context.Context, options swarm.TaskListOptions) ([]swarm.Task, error)
	TaskLogs(ctx context.Context, taskID string, options container.LogsOptions) (io.ReadCloser, error)
	NodeList(ctx context.Context, options swarm.NodeListOptions) ([]swarm.Node, error)

	ConfigCreate(ctx context.Context, config swarm.ConfigSpec) (swarm.ConfigCreateResponse, error)
	ConfigList(ctx context.Context, options swarm.ConfigListOptions) ([]swarm.Config, error)
	ConfigRemove(ctx context.Context, id string) error

	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkRemove(ctx context.Context, networkID string) error

	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageTag(ctx context.Context, source, target string) error
	ImagePush(ctx context.Context, image string, options image.PushOptions) (io.ReadCloser, error)
}

var _ swarmAPI = (client.APIClient)(nil)

// byLineage filters a list call on the lineage label.
func byLineage(lineage string) filters.Args {
	return filters.NewArgs(filters.Arg("label", lineageLabel(lineage)))
}
