package image

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// archiveEnv overrides where the image archive is read from.
const archiveEnv = "TOMBSTONE_RECOVERY_IMAGE"

// The ServiceAccount identity deploy/control-plane/release.yaml binds, as a static token user.
const controllerUser = "system:serviceaccount:eno-system:eno-tombstone-recovery"

var (
	env *kubetest.Env
	// repoRoot holds deploy/.
	repoRoot string
	// img is the unpacked image.
	img *unpacked
)

func TestMain(m *testing.M) {
	root, err := kubetest.RepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	repoRoot = root
	archive := os.Getenv(archiveEnv)
	if archive == "" {
		archive = filepath.Join(root, "bin", "tombstone-recovery-image.tar")
	}
	dir, err := os.MkdirTemp("", "image-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	if img, err = unpack(archive, dir); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	// TestMainWithEnv checks the package for leaked goroutines with goleak once the tests end.
	kubetest.TestMainWithEnv(m, kubetest.Options{Users: []kubetest.User{{
		Name: controllerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:eno-system"},
	}}}, func(e *kubetest.Env) int {
		defer os.RemoveAll(dir)
		env = e
		return m.Run()
	})
}

// unpacked is an image read from its OCI layout archive.
type unpacked struct {
	archive  string
	digest   string
	config   imageConfig
	rootfs   string        // the layers extracted, in order
	entries  []tar.Header  // every entry of every layer, in archive order
	outer    []string      // the archive's own entry names, in order
	manifest imageManifest // the image manifest
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Created      string `json:"created"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

type imageManifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

// unpack reads the archive's index, manifest and config, and extracts its layers into dir.
func unpack(archive, dir string) (*unpacked, error) {
	f, err := os.Open(archive)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("image archive %s not found: run `make image` (make test builds it first), or set %s", archive, archiveEnv)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	blobs := map[string][]byte{}
	u := &unpacked{archive: archive, rootfs: filepath.Join(dir, "rootfs")}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", archive, err)
		}
		u.outer = append(u.outer, h.Name)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		blobs[h.Name] = b
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, fmt.Errorf("%s: index.json must name one manifest (%v)", archive, err)
	}
	blob := func(d string) []byte { return blobs["blobs/"+strings.Replace(d, ":", "/", 1)] }
	u.digest = index.Manifests[0].Digest
	if err := json.Unmarshal(blob(u.digest), &u.manifest); err != nil {
		return nil, fmt.Errorf("%s: manifest %s: %w", archive, u.digest, err)
	}
	if err := json.Unmarshal(blob(u.manifest.Config.Digest), &u.config); err != nil {
		return nil, fmt.Errorf("%s: config: %w", archive, err)
	}
	for _, l := range u.manifest.Layers {
		if err := u.extract(blob(l.Digest)); err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", archive, l.Digest, err)
		}
	}
	return u, nil
}

// extract writes a gzipped layer's directories and regular files under rootfs.
func (u *unpacked) extract(layer []byte) error {
	if layer == nil {
		return errors.New("missing from the archive")
	}
	zr, err := gzip.NewReader(strings.NewReader(string(layer)))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		u.entries = append(u.entries, *h)
		name := path.Clean("/" + h.Name)
		target := filepath.Join(u.rootfs, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm()|0o200)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entry type %q is not shipped by hack/image", h.Name, h.Typeflag)
		}
	}
}
