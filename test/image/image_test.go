package image

import (
	"debug/elf"
	"encoding/json"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entrypoint is where the image keeps the binary.
const entrypoint = "/tombstone-recovery"

// TestImageConfig: the image runs the binary as the non-root user 65532 with no arguments of its
// own, and carries the OCI labels a registry and a scanner read.
func TestImageConfig(t *testing.T) {
	c := img.config
	assert.Equal(t, "application/vnd.oci.image.manifest.v1+json", img.manifest.MediaType)
	assert.Equal(t, "linux", c.OS)
	assert.Equal(t, "65532:65532", c.Config.User)
	assert.Equal(t, []string{entrypoint}, c.Config.Entrypoint)
	assert.Empty(t, c.Config.Cmd, "the Deployment passes `run` and its flags")
	labels := c.Config.Labels
	assert.Equal(t, "https://github.com/Azure/eno-tombstone-recovery", labels["org.opencontainers.image.source"])
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{40}$`), labels["org.opencontainers.image.revision"], "the git commit")
	assert.NotEmpty(t, labels["org.opencontainers.image.version"])
	require.Len(t, img.manifest.Layers, 1)
	assert.Equal(t, "application/vnd.oci.image.layer.v1.tar+gzip", img.manifest.Layers[0].MediaType)
}

// TestImageVersion: the binary reports the version and revision the image's labels carry, which
// `make image` embeds with -ldflags -X (the build has no VCS stamp: -buildvcs=false).
func TestImageVersion(t *testing.T) {
	out, err := exec.Command(filepath.Join(img.rootfs, "tombstone-recovery"), "version", "-o", "json").Output()
	require.NoError(t, err)
	var got map[string]string
	require.NoError(t, json.Unmarshal(out, &got))
	labels := img.config.Config.Labels
	assert.Equal(t, labels["org.opencontainers.image.version"], got["version"])
	assert.Equal(t, labels["org.opencontainers.image.revision"], got["revision"])
	assert.Equal(t, runtime.Version(), got["goVersion"])
}

// TestImageFilesystem: the binary and the user's passwd and group entries, nothing else to run:
// no shell, no package manager, every entry owned by root with a fixed mode and the image's
// time, in sorted order (what makes the digest reproducible).
func TestImageFilesystem(t *testing.T) {
	var names []string
	for _, h := range img.entries {
		names = append(names, h.Name)
		assert.Zero(t, h.Uid, h.Name)
		assert.Zero(t, h.Gid, h.Name)
		assert.Equal(t, img.config.Created, h.ModTime.UTC().Format("2006-01-02T15:04:05Z"), "%s: the image's time", h.Name)
		base := path.Base(h.Name)
		assert.NotContains(t, []string{"sh", "bash", "dash", "ash", "zsh", "busybox", "apt", "apk"}, base, "%s: no shell or package manager", h.Name)
	}
	assert.Equal(t, []string{"etc/", "etc/group", "etc/passwd", "tmp/", "tombstone-recovery"}, names)
	assert.True(t, slices.IsSorted(names))
	assert.True(t, slices.IsSorted(img.outer), "the archive's entries are sorted too")
	assert.NoFileExists(t, filepath.Join(img.rootfs, "bin", "sh"))
	for _, h := range img.entries {
		if h.Name == "tombstone-recovery" {
			assert.EqualValues(t, 0o555, h.Mode, "executable by the non-root user, writable by nobody")
		}
	}
	passwd := readRootFile(t, "etc/passwd")
	assert.Contains(t, passwd, "nonroot:x:65532:65532:")
	assert.NotContains(t, passwd, "/bin/sh", "no login shell")

	bin, err := elf.Open(filepath.Join(img.rootfs, "tombstone-recovery"))
	require.NoError(t, err)
	defer bin.Close()
	for _, p := range bin.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary: the image has no dynamic loader")
	}
}
