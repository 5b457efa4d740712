// Command image writes the OCI image of one static Linux binary without a container daemon and
// without pulling anything: an empty base, one layer holding the binary (plus /etc/passwd and
// /etc/group naming the non-root user and an empty /tmp), user 65532:65532, no shell, and the
// OCI labels source, revision and version.
//
// The same inputs give the same image digest: every timestamp is -created (the commit time),
// tar entries are sorted with fixed owner and modes, and gzip writes no name or time. The output
// is a tar that is an OCI image layout (oci-layout, index.json, blobs/sha256/...) and also carries
// the manifest.json of a docker archive, so `podman load`, `docker load`, `skopeo copy
// oci-archive:` and `crane push` (a tarball, or the layout extracted into a directory) read it.
//
// It lives in its own module (hack/image/go.mod) so that go-containerregistry never enters the
// main module's graph, which eno-reconciler embeds (design §8.1).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRoot is the user and group the image runs as (distroless's nonroot).
const nonRoot = 65532

type options struct {
	binary, entrypoint, output, ref string
	source, revision, version       string
	created                         int64
	arch                            string
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the static Linux binary to ship")
	flag.StringVar(&o.entrypoint, "entrypoint", "", "absolute path of the binary inside the image, e.g. /tombstone-recovery")
	flag.StringVar(&o.output, "output", "", "the image archive to write")
	flag.StringVar(&o.ref, "ref", "", "the reference the archive names the image by (repository:tag)")
	flag.StringVar(&o.source, "source", "", "label org.opencontainers.image.source")
	flag.StringVar(&o.revision, "revision", "", "label org.opencontainers.image.revision (the git commit)")
	flag.StringVar(&o.version, "version", "", "label org.opencontainers.image.version")
	flag.Int64Var(&o.created, "created", 0, "every timestamp of the image, in Unix seconds (SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.arch, "arch", "amd64", "the binary's GOARCH")
	flag.Parse()
	digest, size, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image: %s %s %s (%.1f MiB)\n", o.output, o.ref, digest, float64(size)/(1<<20))
}

func run(o options) (v1.Hash, int64, error) {
	for name, v := range map[string]string{"-binary": o.binary, "-entrypoint": o.entrypoint, "-output": o.output,
		"-ref": o.ref, "-source": o.source, "-revision": o.revision, "-version": o.version} {
		if v == "" {
			return v1.Hash{}, 0, fmt.Errorf("%s is required", name)
		}
	}
	if !path.IsAbs(o.entrypoint) || path.Clean(o.entrypoint) != o.entrypoint || path.Dir(o.entrypoint) != "/" {
		return v1.Hash{}, 0, fmt.Errorf("-entrypoint must be a file in /, got %q", o.entrypoint)
	}
	if err := checkStatic(o.binary); err != nil {
		return v1.Hash{}, 0, err
	}
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	created := time.Unix(o.created, 0).UTC()
	img, err := build(o, bin, created)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	size, err := writeArchive(o, img, created)
	return digest, size, err
}

// checkStatic refuses a binary that needs a dynamic loader: the image has none.
func checkStatic(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("%s is not a Linux binary: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", file)
		}
	}
	return nil
}

// build assembles the image: empty base, one layer, the config.
func build(o options, bin []byte, created time.Time) (v1.Image, error) {
	layerBytes, err := rootFS(o.entrypoint, bin, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image: " + o.entrypoint},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS, cf.Architecture = "linux", o.arch
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonRoot, nonRoot),
		Entrypoint: []string{o.entrypoint},
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.source":   o.source,
			"org.opencontainers.image.revision": o.revision,
			"org.opencontainers.image.version":  o.version,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// rootFS is the gzipped layer: sorted entries, owner root, fixed modes, every time created.
func rootFS(entrypoint string, bin []byte, created time.Time) ([]byte, error) {
	type file struct {
		mode int64
		data []byte
		dir  bool
	}
	files := map[string]file{
		"etc/":         {mode: 0o755, dir: true},
		"etc/passwd":   {mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRoot, nonRoot)},
		"etc/group":    {mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", nonRoot)},
		"tmp/":         {mode: 0o1777, dir: true},
		entrypoint[1:]: {mode: 0o555, data: bin},
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, n := range names {
		f := files[n]
		h := &tar.Header{Name: n, Mode: f.mode, ModTime: created, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes the OCI image layout, plus docker's manifest.json, as one tar.
func writeArchive(o options, img v1.Image, created time.Time) (int64, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return 0, err
	}
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		return 0, err
	}
	tag := o.ref
	if i := strings.LastIndex(o.ref, ":"); i > strings.LastIndex(o.ref, "/") {
		tag = o.ref[i+1:]
	}
	desc.Annotations = map[string]string{"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": o.ref}
	desc.Platform = &v1.Platform{OS: "linux", Architecture: o.arch}
	desc.ArtifactType = "" // an image, not an artifact
	index, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{*desc}})
	if err != nil {
		return 0, err
	}

	entries := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": index,
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	configName, err := img.ConfigName()
	if err != nil {
		return 0, err
	}
	digest, err := img.Digest()
	if err != nil {
		return 0, err
	}
	entries[blob(digest)] = manifest
	entries[blob(configName)] = config
	docker := struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{Config: blob(configName), RepoTags: []string{o.ref}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return 0, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return 0, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return 0, err
		}
		entries[blob(d)] = b
		docker.Layers = append(docker.Layers, blob(d))
	}
	dockerManifest, err := json.Marshal([]any{docker})
	if err != nil {
		return 0, err
	}
	entries["manifest.json"] = dockerManifest

	if err := os.MkdirAll(filepath.Dir(o.output), 0o755); err != nil {
		return 0, err
	}
	tmp := o.output + ".tmp"
	if err := writeTar(tmp, entries, created); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	if err := os.Rename(tmp, o.output); err != nil {
		return 0, err
	}
	var size int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		size += s
	}
	return size + int64(len(config)) + int64(len(manifest)), nil
}

// writeTar writes entries (and the directories above them) sorted, owner root, fixed modes.
func writeTar(file string, entries map[string][]byte, created time.Time) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	dirs := map[string]bool{}
	for n := range entries {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	names := make([]string, 0, len(entries)+len(dirs))
	for n := range entries {
		names = append(names, n)
	}
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	tw := tar.NewWriter(f)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: created, Format: tar.FormatPAX}
		if dirs[n] {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o444, int64(len(entries[n]))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(entries[n]); err != nil {
			return err
		}
	}
	return tw.Close()
}
