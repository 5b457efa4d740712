package kubetest

import "syscall"

// childSysProcAttr makes the kernel kill a child if the test process dies without calling Stop
// (a panic, a -timeout, a SIGKILL), so no etcd or kube-apiserver outlives its test run.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
