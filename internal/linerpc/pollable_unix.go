//go:build unix

package linerpc

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// pollable returns f's descriptor as a File that Go's network poller waits
// on, when f is a pipe or a socket (what an MCP client gives the gateway it
// starts) that is not also stderr: a duplicate of the descriptor, set
// non-blocking, so that os.NewFile returns a pollable File. Anything else
// is returned as it is: a terminal, a file or /dev/null may be shared with
// the shell that started the gateway, and stderr stays blocking for the
// logger's writes through os.Stderr. So is a File the poller waits on
// already (os.Stdin of a descriptor that was non-blocking when the process
// started). A descriptor that is non-blocking behind a blocking File
// (stdout on the same socket as stdin, which this made non-blocking) gets a
// pollable File too: the blocking one's writes would fail with EAGAIN.
//
// Non-blocking is a property of the open pipe or socket, not of the
// descriptor: a shell that started the gateway on a pipe or a FIFO hands
// the same one to the command after it (`{ toolgate serve; cat; } < fifo`),
// whose reads failed with EAGAIN. RestoreStdio puts blocking mode back
// before the process exits; f itself stays open until then (the duplicate
// is what Close closes), so it still names the same pipe.
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
	fd, switched := -1, false
	if err := rc.Control(func(d uintptr) {
		flags, err := unix.FcntlInt(d, unix.F_GETFL, 0)
		if err != nil {
			return
		}
		dup, err := unix.FcntlInt(d, unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return
		}
		if flags&unix.O_NONBLOCK == 0 {
			if unix.SetNonblock(dup, true) != nil {
				unix.Close(dup)
				return
			}
			switched = true
		}
		fd = dup
	}); err != nil || fd < 0 {
		return f
	}
	if switched {
		madeNonblocking.Lock()
		madeNonblocking.files = append(madeNonblocking.files, f)
		madeNonblocking.Unlock()
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// madeNonblocking holds the files whose pipe or socket pollable made
// non-blocking (RestoreStdio).
var madeNonblocking struct {
	sync.Mutex
	files []*os.File
}

// RestoreStdio puts the client's pipes or socket that the gateway's stdio
// made non-blocking (pollable) back into blocking mode, as the process that
// started the gateway gave them: call it before the process exits. A File
// the poller waits on keeps working on a blocking descriptor (its reads and
// writes block in the system call), so a stop still writing is not broken.
func RestoreStdio() {
	madeNonblocking.Lock()
	defer madeNonblocking.Unlock()
	for _, f := range madeNonblocking.files {
		if rc, err := f.SyscallConn(); err == nil {
			_ = rc.Control(func(d uintptr) { _ = unix.SetNonblock(int(d), false) })
		}
	}
	madeNonblocking.files = nil
}
