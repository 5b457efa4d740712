package kubetest

import "syscall"

// ChildSysProcAttr makes the kernel kill a child if the test process dies without stopping it
// (a panic, a -timeout, a SIGKILL), so no etcd, kube-apiserver or binary under test outlives its
// test run.
func ChildSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
