package docker

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/system"
)

// Measuring what a container wrote (its layer's SizeRw, which `status`
// shows and a plan's discard warning quotes) is cheap only where the
// engine's storage sizes a container's own layer alone: overlay2 with its
// native diff, or containerd's overlayfs snapshotter. Every other storage
// driver (fuse-overlayfs, vfs, btrfs, zfs, overlay2 without native diff)
// goes through the engine's naive diff, which mounts the container and
// walks every file of it and of its image: measured here on
// fuse-overlayfs, 35 ms for a busybox container and 5 to 7 s for one whose
// image has 30,000 files. A plan of ten real agents would wait a minute
// for a warning; there bottlefile does not measure and says so.

// WritesMeasurable reports whether an engine with this info sizes a
// container's own layer cheaply, and if not, why not: the reason a plan
// or status gives for not saying how much was written.
func WritesMeasurable(info system.Info) (bool, string) {
	switch info.Driver {
	case "overlay2":
		for _, kv := range info.DriverStatus {
			if len(kv) == 2 && kv[0] == "Native Overlay Diff" && kv[1] == "true" {
				return true, ""
			}
		}
		return false, "the engine's overlay2 storage has no native diff, so sizing it reads every file"
	case "overlayfs": // containerd's snapshotter (docker 24+ with the containerd image store)
		return true, ""
	case "":
		return false, "the engine does not say which storage it uses"
	}
	return false, fmt.Sprintf("the engine's %s storage sizes it by reading every file", info.Driver)
}

// writesMeasurable is WritesMeasurable for the driver's engine, asked once
// per configured driver (a plan's discard reads ask it for each agent at
// once). An engine whose info cannot be read is measured as before: the
// size read then fails or works on its own.
func (d *Driver) writesMeasurable(ctx context.Context, api dockerAPI) (bool, string) {
	c := d.checksFor()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.sizesDone {
		c.sizesDone, c.sizesOK = true, true
		if info, err := api.Info(ctx); err != nil {
			d.log.Debug("cannot read the engine's storage driver; measuring writes anyway", "error", err)
		} else {
			c.sizesOK, c.sizesWhy = WritesMeasurable(info)
			d.log.Debug("engine storage", "driver", info.Driver, "writes_measured", c.sizesOK)
		}
	}
	return c.sizesOK, c.sizesWhy
}
