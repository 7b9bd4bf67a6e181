package docker

import (
	"testing"

	"github.com/docker/docker/api/types/system"
)

// measureWrites makes d measure writes whatever its engine's storage, for
// tests of the measuring path on an engine that would not.
func measureWrites(d *Driver) {
	c := d.checksFor()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sizesDone, c.sizesOK, c.sizesWhy = true, true, ""
}

func TestWritesMeasurable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		info   system.Info
		want   bool
		reason string
	}{
		{"overlay2 with native diff", system.Info{Driver: "overlay2", DriverStatus: [][2]string{{"Backing Filesystem", "extfs"}, {"Native Overlay Diff", "true"}}}, true, ""},
		{"overlay2 without", system.Info{Driver: "overlay2", DriverStatus: [][2]string{{"Native Overlay Diff", "false"}}}, false, "the engine's overlay2 storage has no native diff, so sizing it reads every file"},
		{"containerd snapshotter", system.Info{Driver: "overlayfs", DriverStatus: [][2]string{{"driver-type", "io.containerd.snapshotter.v1"}}}, true, ""},
		{"fuse-overlayfs", system.Info{Driver: "fuse-overlayfs"}, false, "the engine's fuse-overlayfs storage sizes it by reading every file"},
		{"vfs", system.Info{Driver: "vfs"}, false, "the engine's vfs storage sizes it by reading every file"},
		{"unknown", system.Info{}, false, "the engine does not say which storage it uses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := WritesMeasurable(tc.info)
			if got != tc.want || why != tc.reason {
				t.Errorf("WritesMeasurable = %v, %q; want %v, %q", got, why, tc.want, tc.reason)
			}
		})
	}
}
