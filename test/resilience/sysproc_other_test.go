//go:build !linux

package resilience_test

import "syscall"

func childSysProcAttr() *syscall.SysProcAttr { return nil }
