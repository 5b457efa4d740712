package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name              string
		version, revision string
		bi                *debug.BuildInfo
		want              Info
	}{
		{
			name:    "embedded by make build",
			version: "v1.2.3", revision: "0123abc",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "(devel)"}},
			want: Info{Version: "v1.2.3", Revision: "0123abc", GoVersion: "go1.26.8"},
		},
		{
			name:    "embedded version without a revision",
			version: "v1.2.3",
			bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module}},
			want:    Info{Version: "v1.2.3", Revision: Unknown, GoVersion: "go1.26.8"},
		},
		{
			name: "go build in a checkout: the toolchain's version and vcs.revision",
			bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "v0.0.0-20261204183630-b36c7b3d1a2e+dirty"},
				Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "b36c7b3d1a2e"}}},
			want: Info{Version: "v0.0.0-20261204183630-b36c7b3d1a2e+dirty", Revision: "b36c7b3d1a2e", GoVersion: "go1.26.8"},
		},
		{
			name: "-buildvcs=false: no revision",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: Module, Version: "(devel)"}},
			want: Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.8"},
		},
		{
			// hack/eno-wire.sh requires v0.0.0 and replaces it by a checkout (design §8.2).
			name: "the guest in eno-reconciler: a local replacement is (devel), the host's revision is not ours",
			bi: &debug.BuildInfo{GoVersion: "go1.25.4", Main: debug.Module{Path: "github.com/Azure/eno", Version: "(devel)"},
				Deps:     []*debug.Module{{Path: "github.com/go-logr/logr", Version: "v1.4.3"}, {Path: Module, Version: "v0.0.0", Replace: &debug.Module{Path: "/src/eno-tombstone-recovery"}}},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feedface"}}},
			want: Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.25.4"},
		},
		{
			name: "a guest required at a release",
			bi: &debug.BuildInfo{GoVersion: "go1.25.4", Main: debug.Module{Path: "github.com/Azure/eno"},
				Deps: []*debug.Module{{Path: Module, Version: "v0.3.0"}}},
			want: Info{Version: "v0.3.0", Revision: Unknown, GoVersion: "go1.25.4"},
		},
		{
			name: "a guest replaced by another module version",
			bi: &debug.BuildInfo{GoVersion: "go1.25.4", Main: debug.Module{Path: "github.com/Azure/eno"},
				Deps: []*debug.Module{{Path: Module, Version: "v0.3.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.3.1"}}}},
			want: Info{Version: "v0.3.1", Revision: Unknown, GoVersion: "go1.25.4"},
		},
		{
			name: "no build info at all",
			want: Info{Version: "(devel)", Revision: Unknown, GoVersion: runtime.Version()},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, resolve(tc.version, tc.revision, tc.bi))
		})
	}
}

func TestReadNeverReturnsEmptyFields(t *testing.T) {
	got := Read()
	assert.NotEmpty(t, got.Version)
	assert.NotEmpty(t, got.Revision)
	assert.NotEmpty(t, got.GoVersion)
}
