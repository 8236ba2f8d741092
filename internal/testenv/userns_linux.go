package testenv

import (
	"os"
	"syscall"
)

// OwnUserNamespace is the SysProcAttr of a child in a user namespace of its
// own, mapped to this process's user and group: there it may lower the
// kernel's per-namespace limits (/proc/sys/user/max_inotify_instances,
// max_inotify_watches, …) without touching the machine's. Starting such a
// child needs root or unprivileged user namespaces; a test names that when
// the start fails (Missing).
func OwnUserNamespace() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
}

// NoUserNamespace is the Missing message when OwnUserNamespace's child
// cannot start.
const NoUserNamespace = "cannot start a process in a user namespace of its own (%v): run as root or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
