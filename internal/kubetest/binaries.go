package kubetest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

const (
	// mainModule is the module whose root holds bin/.
	mainModule = "github.com/Azure/eno-tombstone-recovery"

	// binDirEnv overrides where the binaries are looked up.
	binDirEnv = "KUBETEST_BIN_DIR"
)

type binaries struct {
	etcd      string
	apiserver string
}

// locateBinaries finds etcd and kube-apiserver in $KUBETEST_BIN_DIR, else in <repo root>/bin.
func locateBinaries() (binaries, error) {
	dir := os.Getenv(binDirEnv)
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return binaries{}, fmt.Errorf("kubetest: %w; set %s to the directory holding etcd and kube-apiserver", err, binDirEnv)
		}
		dir = filepath.Join(root, "bin")
	}
	b := binaries{etcd: filepath.Join(dir, "etcd"), apiserver: filepath.Join(dir, "kube-apiserver")}
	for _, path := range []string{b.etcd, b.apiserver} {
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return binaries{}, fmt.Errorf("kubetest: %s not found: run `make testbin` (hack/testbin.sh) to build etcd and kube-apiserver, or set %s", path, binDirEnv)
		case err != nil:
			return binaries{}, fmt.Errorf("kubetest: checking %s: %w", path, err)
		case info.IsDir() || info.Mode().Perm()&0o111 == 0:
			return binaries{}, fmt.Errorf("kubetest: %s is not an executable file: run `make testbin` (hack/testbin.sh) to rebuild it", path)
		}
	}
	return b, nil
}

// RepoRoot walks up to the directory whose go.mod declares the main module. It starts from the
// working directory (go test runs in the package directory) and falls back to this source file's
// directory. It skips go.mod files of nested modules such as test/kube and tools.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if modulePath(filepath.Join(dir, "go.mod")) == mainModule {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("cannot find the go.mod of %s above the working directory", mainModule)
}

// modulePath returns the module path declared in a go.mod file, or "" if there is none.
func modulePath(goMod string) string {
	f, err := os.Open(goMod)
	if err != nil {
		return ""
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
