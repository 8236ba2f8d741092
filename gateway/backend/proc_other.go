//go:build unix && !linux

package backend

import (
	"os"
	"syscall"
)

// sysProcAttr puts the child in its own process group. (No parent-death
// signal outside Linux.)
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// groupAlive reports whether process group pgid has a member (zombies count).
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// procAlive reports whether pid exists.
func procAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// pipeUnread is nil: how much of a pipe is unread is not asked outside Linux.
func pipeUnread(*os.File) func() (int, bool) { return nil }
