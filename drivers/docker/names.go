package docker

import (
	"maps"
	"slices"
	"strings"

	"github.com/bottlefile/bottlefile/drivers/engine"
)

// Kinds of object the driver makes (drivers/engine names them).
const (
	kindNetwork   = engine.KindNetwork
	kindImage     = engine.KindImage
	kindContainer = engine.KindContainer
)

func trimSlash(name string) string {
	return strings.TrimPrefix(name, "/")
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
