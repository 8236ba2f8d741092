package backend

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in its own process group (so that stopping it
// reaches everything it spawned) and asks the kernel to SIGKILL it if the
// gateway dies without stopping it (Pdeathsig fires when the thread that
// forked it exits; the Go runtime does not end threads that are not locked).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupAlive reports whether any live (non-zombie) process is in process
// group pgid. Zombies are ignored because an orphan's reaper (pid 1 in a
// container) may take its time. Without /proc it falls back to kill(-pgid, 0).
func groupAlive(pgid int) bool {
	d, err := os.Open("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if state, pg, ok := procStat(n); ok && pg == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// procAlive reports whether pid is a live, non-zombie process.
func procAlive(pid int) bool {
	state, _, ok := procStat(strconv.Itoa(pid))
	if !ok {
		return syscall.Kill(pid, 0) == nil
	}
	return state != 'Z' && state != 'X'
}

// procStat reads the state and process group of /proc/<pid>/stat.
func procStat(pid string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid pgrp ..."; comm may contain spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}

// pipeUnread is how many bytes written to the pipe w have not been read
// from it yet (TIOCINQ, which Linux answers on either end of a pipe).
func pipeUnread(w *os.File) func() (int, bool) {
	sc, err := w.SyscallConn()
	if err != nil {
		return nil
	}
	return func() (int, bool) {
		n, ierr := 0, error(nil)
		if err := sc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
			return 0, false
		}
		return n, true
	}
}
