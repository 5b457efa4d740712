//go:build !linux

package e2e

import "syscall"

func childSysProcAttr() *syscall.SysProcAttr { return nil }
