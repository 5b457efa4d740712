package perf

import "syscall"

// childSysProcAttr kills the controller if the test process dies first (a test timeout, say),
// so no orphan keeps running against a stopped proxy.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
