package kubetest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// logTailLines is how much of a process's log a start error carries.
const logTailLines = 40

// process is one child process whose combined stdout and stderr go to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // valid after done is closed
}

// launch starts binary with args, writing its output to logPath. A goroutine reaps the process
// so that exits are noticed while waiting for readiness; it ends when the process ends.
func launch(name, binary string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating %s log file: %w", name, err)
	}
	// The child gets its own copy of the descriptor, so ours is closed once it has started.
	defer logFile.Close()

	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = ChildEnv()
	cmd.SysProcAttr = ChildSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, binary, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// ChildEnv is the environment of a child process: without proxy settings, so loopback traffic is
// never sent through a proxy, and without KUBECONFIG or POD_NAMESPACE, so a binary under test
// goes only by its flags.
func ChildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(key) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "KUBECONFIG", "POD_NAMESPACE":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has already ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the process ended; call only after exited reports true.
func (p *process) exitError() error {
	if p.waitErr != nil {
		return fmt.Errorf("%s (pid %d) exited: %w", p.name, p.pid(), p.waitErr)
	}
	return fmt.Errorf("%s (pid %d) exited with status 0", p.name, p.pid())
}

// kill sends SIGKILL to the process by its PID and waits until it has been reaped.
// The environment is disposable, so there is nothing to shut down gracefully.
func (p *process) kill() error {
	if p == nil {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s (pid %d): %w", p.name, p.pid(), err)
	}
	<-p.done
	return nil
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	defer f.Close()
	lines := make([]string, 0, n)
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		if len(lines) == n {
			lines = append(lines[:0], lines[1:]...)
		}
		lines = append(lines, scanner.Text())
	}
	if len(lines) == 0 {
		return "(empty)"
	}
	return strings.Join(lines, "\n")
}

// logContains reports whether the process's log mentions s.
func (p *process) logContains(s string) bool {
	data, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(data), s)
}
