package docker

import (
	"github.com/bottlefile/bottlefile/drivers"
	"github.com/bottlefile/bottlefile/drivers/engine"
	"github.com/bottlefile/bottlefile/drivers/gateway"
)

var _ drivers.EngineNamer = (*Driver)(nil)

// EngineName is the name an object is created under on the engine, for
// the intent recorded before its create; "" when it is named only later
// (a built image's tag comes from its context hash).
func (d *Driver) EngineName(lineage string, o drivers.Object) string {
	var name string
	var err error
	switch o.Kind {
	case kindNetwork:
		if isEgressNetworkAddr(o.Addr) {
			name, err = egressNetworkName(lineage, o.Addr)
		} else {
			name, err = engine.ObjectName(lineage, o.Addr, kindNetwork)
		}
	case kindContainer, gateway.Kind:
		name, err = engine.ObjectName(lineage, o.Addr, kindContainer)
	case drivers.KindSnapshot:
		agent, aerr := drivers.String(o.Attr("agent"))
		if aerr != nil || agent == "" {
			return ""
		}
		name, err = engine.SnapshotRef(lineage, o.Addr, agent)
	}
	if err != nil {
		return ""
	}
	return name
}
