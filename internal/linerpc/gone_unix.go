//go:build unix

package linerpc

import (
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// ReaderGone watches f, the write end of a pipe or a socket (stdout of a
// stdio server), for its reader closing its end. Gone is closed then:
// the client has gone, as one that closes stdin has. A write would find it
// (EPIPE) only at the gateway's next reply, which a call in flight holds
// back for as long as it runs: the call ran on for a client that could no
// longer read its answer, and the gateway with it.
type ReaderGone struct {
	gone     chan struct{}
	stopR    *os.File
	stopW    *os.File
	done     chan struct{}
	stopOnce sync.Once
}

// WatchReaderGone starts watching f; anything but a pipe or a socket (a
// terminal, a file, /dev/null) has no reader to lose, and Gone is never
// closed. Stop ends the watch.
func WatchReaderGone(f *os.File) *ReaderGone {
	g := &ReaderGone{gone: make(chan struct{}), done: make(chan struct{})}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		close(g.done)
		return g
	}
	// Not f.Fd(): it puts a non-blocking descriptor into blocking mode.
	rc, err := f.SyscallConn()
	fd := -1
	if err == nil {
		err = rc.Control(func(d uintptr) { fd = int(d) })
	}
	if err != nil || fd < 0 {
		close(g.done)
		return g
	}
	if g.stopR, g.stopW, err = os.Pipe(); err != nil {
		close(g.done)
		return g
	}
	go g.watch(fd)
	return g
}

// Gone is closed once f's reader has closed its end.
func (g *ReaderGone) Gone() <-chan struct{} { return g.gone }

func (g *ReaderGone) watch(fd int) {
	defer close(g.done)
	// No events asked for: a pipe's write end reports POLLERR once it has
	// no reader, a socket POLLHUP once its peer closed; the stop pipe is
	// readable once Stop writes to it.
	fds := []unix.PollFd{{Fd: int32(fd)}, {Fd: int32(g.stopR.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			close(g.gone)
			return
		}
		if fds[0].Revents&unix.POLLNVAL != 0 {
			return // f was closed
		}
	}
}

// Stop ends the watch and waits for it.
func (g *ReaderGone) Stop() {
	g.stopOnce.Do(func() {
		if g.stopW != nil {
			_, _ = g.stopW.Write([]byte{0})
		}
		<-g.done
		if g.stopW != nil {
			g.stopW.Close()
			g.stopR.Close()
		}
	})
}
