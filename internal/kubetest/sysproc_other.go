//go:build !linux

package kubetest

import "syscall"

// ChildSysProcAttr has no parent-death signal outside Linux; stopping children is up to the caller.
func ChildSysProcAttr() *syscall.SysProcAttr { return nil }

// DropPageCache does nothing outside Linux.
func DropPageCache(string) error { return nil }
