package resilience_test

import "syscall"

// childSysProcAttr kills a controller process if the test process dies without stopping it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
