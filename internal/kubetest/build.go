package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// binaryPackage is the command the end-to-end tests run as a real process.
const binaryPackage = mainModule + "/cmd/tombstone-recovery"

// StartBuild starts `go build` of cmd/tombstone-recovery into dir, with -race when race is set
// (RaceEnabled builds it as the tests themselves are built). The build runs in the background,
// for instance while an API server starts; wait waits for it and returns the binary's path, or
// the build's output on failure.
func StartBuild(dir string, race bool) (wait func() (string, error), err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("kubetest: building %s: %w", binaryPackage, err)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("kubetest: building %s: %w", binaryPackage, err)
	}
	out := filepath.Join(dir, "tombstone-recovery")
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, binaryPackage)
	logPath := filepath.Join(dir, "build.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("kubetest: building %s: %w", binaryPackage, err)
	}
	// The child gets its own copy of the descriptor.
	defer logFile.Close()
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = ChildSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubetest: go %s: %w", strings.Join(args, " "), err)
	}
	return func() (string, error) {
		if err := cmd.Wait(); err != nil {
			log, _ := os.ReadFile(logPath)
			return "", fmt.Errorf("kubetest: go %s: %w\n%s", strings.Join(args, " "), err, log)
		}
		return out, nil
	}, nil
}
