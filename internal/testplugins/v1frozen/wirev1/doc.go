// Package wirev1 is a frozen copy of the protocol v1 Go code exactly as the
// first SDK shipped it (pluginapi/internal/wire before protocol v2). Never
// regenerate or edit it: the compatibility test proves that a plugin built
// against it still works with the current host.
package wirev1
