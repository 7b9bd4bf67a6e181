package swarm

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/bottlefile/bottlefile/addrs"
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

// Kinds of object the driver makes.
const (
	kindNetwork = engine.KindNetwork
	kindImage   = engine.KindImage
	kindService = "service"
	kindGateway = gateway.Kind
)

// labelKind marks what is not a plain service: gateways, and the configs
// they read.
const labelKind = drivers.LabelPrefix + "kind"

// kindGatewayConfig marks a gateway's configs.
const kindGatewayConfig = "gateway-config"

// maxServiceName is the longest service name the cluster's DNS serves: a
// DNS label.
const maxServiceName = 63

func lineageLabel(lineage string) string { return drivers.LabelLineage + "=" + lineage }

// serviceName is the cluster-wide name of the service at addr (an agent,
// sidecar or gateway): the docker driver's container name for it.
func serviceName(lineage, addr string) (string, error) {
	name, err := engine.ObjectName(lineage, addr, engine.KindContainer)
	if err != nil {
		return "", err
	}
	return name, checkClusterName(name)
}

// clusterName is what the cluster takes as a service's or network's name:
// a DNS name component (letters and digits, with single runs of '-' or
// '_' between them), at most 63 characters.
var clusterName = regexp.MustCompile(`^[a-zA-Z0-9](?:[-_]*[A-Za-z0-9]+)*$`)

func checkClusterName(name string) error {
	if !clusterName.MatchString(name) {
		return fmt.Errorf("%s cannot name a swarm service or network, whose names are DNS name components: use letters, digits, '-' and '_' (no '.') in the names of agents, sidecars and runtimes, starting and ending with a letter or digit", name)
	}
	if len(name) > maxServiceName {
		return fmt.Errorf("%s is longer than %d characters, which the cluster's DNS cannot serve: shorten the agent's (or sidecar's) name", name, maxServiceName)
	}
	return nil
}

// networkName is the name of a bottle's overlay network, or of the
// runtime's managed egress network.
// The egress network's is bf-<lineage[:8]>_egress-<runtime>: the '_'
// after the lineage keeps it apart from every bottle's network.
func networkName(lineage, addr string) (string, error) {
	var name string
	var err error
	if a, perr := addrs.Parse(addr); perr == nil && a.Kind() == addrs.EgressNetworkKind {
		prefix := drivers.LineagePrefix(lineage)
		if prefix == "" {
			return "", fmt.Errorf("no lineage to name %s by", addr)
		}
		name = "bf-" + prefix + "_egress-" + a.Name()
	} else if name, err = engine.ObjectName(lineage, addr, engine.KindNetwork); err != nil {
		return "", err
	}
	return name, checkClusterName(name)
}

// isEgressNetworkAddr reports whether addr is a runtime's egress network.
func isEgressNetworkAddr(addr string) bool {
	a, err := addrs.Parse(addr)
	return err == nil && a.Kind() == addrs.EgressNetworkKind
}

// agentOf is the agent address an object of a bottle belongs to.
func agentOf(addr string) string {
	a, ok := addrs.AgentOf(addr)
	if !ok {
		return addr
	}
	return a.String()
}

// shortID shortens engine ids for messages.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
