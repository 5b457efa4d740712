package kubetest

import (
	"os"
	"syscall"
)

// ChildSysProcAttr makes the kernel kill a child if the test process dies without stopping it
// (a panic, a -timeout, a SIGKILL), so no etcd, kube-apiserver or binary under test outlives its
// test run.
func ChildSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// DropPageCache writes path's dirty pages and drops the file's pages from the page cache
// (POSIX_FADV_DONTNEED), so that a binary started next reads it in through its own page faults.
// A file's cached pages are mapped around each fault (RssFile), in folios whose size depends on
// how they got into the cache: a binary just linked or copied maps MiBs more than one read in by
// a process, so two binaries compared by RSS start from the same state.
func DropPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	const fadvDontNeed = 4
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
