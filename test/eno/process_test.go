//go:build eno

package eno

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// stopWithin bounds how long a process may take to exit after SIGTERM before it is killed.
const stopWithin = 30 * time.Second

// process is one child process (an Eno binary or tombstone-recovery) whose combined output
// goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done
	stopped bool          // stop was called: an exit is expected
	// mayDie, when set, reports whether an exit is expected although stop was not called (a
	// crash the scenario injected).
	mayDie func(pid int) bool
}

// startProcess runs binary with args and the test environment plus extraEnv (KEY=VALUE).
func startProcess(name, binary string, args, extraEnv []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: creating log file: %w", name, err)
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(kubetest.ChildEnv(), extraEnv...)
	cmd.SysProcAttr = kubetest.ChildSysProcAttr()
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

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// unexpectedExit describes an exit that nobody asked for, or is nil.
func (p *process) unexpectedExit() error {
	if p == nil || p.stopped || !p.exited() || (p.mayDie != nil && p.mayDie(p.pid())) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) exited unexpectedly: %v\n--- last 40 lines of %s ---\n%s",
		p.name, p.pid(), p.waitErr, p.name, p.tail(40))
}

// stop sends SIGTERM to the process by its PID, waits for it to exit, and kills it (again by
// PID) if it has not exited within stopWithin. It returns how the process ended, or an error if
// it had to be killed. Safe to call twice.
func (p *process) stop() error {
	if p == nil {
		return nil
	}
	p.stopped = true
	if p.exited() {
		return p.waitErr
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling %s (pid %d): %w", p.name, p.pid(), err)
	}
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(stopWithin):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s (pid %d) did not exit within %s of SIGTERM; killed", p.name, p.pid(), stopWithin)
	}
}

// log returns the whole log.
func (p *process) log() string { return readFile(p.logPath) }

// logSince returns the log from byte offset on.
func (p *process) logSince(offset int64) string {
	s := p.log()
	if offset > int64(len(s)) {
		return ""
	}
	return s[offset:]
}

// logSize is the current length of the log, for logSince.
func (p *process) logSize() int64 {
	info, err := os.Stat(p.logPath)
	if err != nil {
		return 0
	}
	return info.Size()
}

// tail returns the last n lines of the log.
func (p *process) tail(n int) string { return tailLines(p.log(), n) }

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := strings.Join(lines, "\n")
	if out == "" {
		return "(empty)"
	}
	return out
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}

// recoveredPanicMessage is the log message of a panic the recovery controller recovered in a
// reconcile (app.Controller): logged and retried, never reaching the process.
const recoveredPanicMessage = `"msg":"reconcile panicked; retrying with backoff"`

// injectedFault starts the value of a panic that the fault injection build raised.
const injectedFault = "injected fault: "

// panicLines returns the lines of log that mention a panic (case-insensitive), at most max;
// with allowRecovered, not those of an injected panic the recovery controller recovered (a
// panic that escaped would end the process, which the scenario reports on its own).
func panicLines(log string, max int, allowRecovered bool) []string {
	var found []string
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		if allowRecovered && strings.Contains(sc.Text(), injectedFault) {
			continue // the recovered panic itself, and the reconcile error it became
		}
		if strings.Contains(strings.ToLower(sc.Text()), "panic") {
			found = append(found, sc.Text())
			if len(found) == max {
				break
			}
		}
	}
	return found
}
