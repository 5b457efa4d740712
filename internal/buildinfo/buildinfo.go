// Package buildinfo says which build of tombstone-recovery is running: the version and revision
// `make build` and `make image` embed with -ldflags -X, else what the Go toolchain recorded in
// the binary. It imports only the standard library.
package buildinfo

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"slices"
)

// Module is this module's path, looked up among the dependencies when another binary (the
// wired eno-reconciler) embeds it.
const Module = "github.com/Azure/eno-tombstone-recovery"

// Unknown stands for a revision nothing recorded.
const Unknown = "unknown"

// Set by the Makefile:
//
//	-ldflags "-X github.com/Azure/eno-tombstone-recovery/internal/buildinfo.version=v1.2.3
//	          -X github.com/Azure/eno-tombstone-recovery/internal/buildinfo.revision=<commit>"
var version, revision string

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
}

// Read returns the running build's identity.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, revision, bi)
}

// resolve prefers what the linker embedded; otherwise it reads the toolchain's build info: this
// module as the main module (go build, go install), else as a dependency of the host binary
// (the guest in eno-reconciler), where a local replacement reports "(devel)".
func resolve(embeddedVersion, embeddedRevision string, bi *debug.BuildInfo) Info {
	info := Info{Version: "(devel)", Revision: Unknown, GoVersion: runtime.Version()}
	if bi != nil && bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if embeddedVersion != "" {
		info.Version = embeddedVersion
		if embeddedRevision != "" {
			info.Revision = embeddedRevision
		}
		return info
	}
	if bi == nil {
		return info
	}
	m := &bi.Main
	if m.Path != Module {
		// A dependency: the host's vcs.revision is the host's commit, not ours, so it is not reported.
		i := slices.IndexFunc(bi.Deps, func(d *debug.Module) bool { return d.Path == Module })
		if i < 0 {
			return info
		}
		m = cmp.Or(bi.Deps[i].Replace, bi.Deps[i]) // a local replacement has no version: (devel)
	}
	if m.Version != "" {
		info.Version = m.Version
	}
	for _, s := range bi.Settings {
		if m == &bi.Main && s.Key == "vcs.revision" && s.Value != "" {
			info.Revision = s.Value
		}
	}
	return info
}
