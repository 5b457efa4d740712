//go:build !linux

package perf

import "syscall"

func childSysProcAttr() *syscall.SysProcAttr { return nil }
