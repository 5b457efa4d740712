package e2e

import "syscall"

// childSysProcAttr kills the binary if the test process dies without stopping it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
