//go:build unix

package linerpc

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pollable returns f's descriptor as a File that Go's network poller waits
// on, when f is a pipe or a socket (what an MCP client gives the gateway it
// starts) that is not also stderr: the descriptor is set non-blocking, and
// os.NewFile then returns a pollable File. Anything else is returned as it
// is: a terminal, a file or /dev/null may be shared with the shell that
// started the gateway, and stderr stays blocking for the logger's writes
// through os.Stderr. So is a File the poller waits on already (os.Stdin
// of a descriptor that was non-blocking when the process started). A
// descriptor that is non-blocking behind a blocking File (stdout on the
// same socket as stdin, which this made non-blocking) gets a pollable File
// too: the blocking one's writes would fail with EAGAIN.
//
// os.Stdin and os.Stdout of a client's pipes are blocking files. A read
// blocked in the system call holds its thread and the scheduler's P (the
// runtime takes the P back only after a while), so the goroutine the read
// loop hands a request to waits for another thread to be woken, and the
// runtime's monitor keeps waking to take Ps back: on a 2-vCPU VM that was
// about 40 µs of every execute_tool call (see README, Performance). A
// pollable read parks the goroutine instead, and Close ends it.
func pollable(f, stderr *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	if ei, err := stderr.Stat(); err == nil && os.SameFile(fi, ei) {
		return f
	}
	if f.SetDeadline(time.Time{}) == nil {
		return f // the poller's already
	}
	// Not f.Fd(): it puts a non-blocking descriptor into blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	var fd uintptr
	ok := false
	if err := rc.Control(func(d uintptr) {
		flags, err := unix.FcntlInt(d, unix.F_GETFL, 0)
		if err == nil && (flags&unix.O_NONBLOCK != 0 || unix.SetNonblock(int(d), true) == nil) {
			fd, ok = d, true
		}
	}); err != nil || !ok {
		return f
	}
	return os.NewFile(fd, f.Name())
}
