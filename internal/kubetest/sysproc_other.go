//go:build !linux

package kubetest

import "syscall"

// childSysProcAttr has no parent-death signal outside Linux; Stop remains the way to end children.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
