//go:build unix

package linerpc

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/testenv"
)

// blockingPipe is a pipe whose read end is a blocking descriptor, as the
// stdin an MCP client gives the gateway it starts (os.Pipe's are
// non-blocking).
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// stderrFile is a regular file for stderr: not the pipe pollable is given.
func stderrFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestPollablePipe: a client's pipe becomes a file the poller waits on (its
// reads take deadlines, and Close ends a read waiting for input), where
// os.Stdin's blocking read held a thread and a P for as long as the client
// was silent. os.Stdin as it was (pollable returning f) fails the deadline.
func TestPollablePipe(t *testing.T) {
	r, w := blockingPipe(t)
	stderr := stderrFile(t)
	f := pollable(r, stderr)
	if f == r {
		t.Fatal("a blocking pipe was returned as it is, not as a file the poller waits on")
	}
	if err := f.SetReadDeadline(time.Now()); err != nil {
		t.Fatalf("SetReadDeadline: %v; want a pollable file", err)
	}
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if n, err := f.Read(buf); n != 1 || err != nil || buf[0] != 'x' {
		t.Fatalf("read %d %q, %v; want the byte written", n, buf[:n], err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.Read(buf)
		done <- err
	}()
	f.Close()
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read ended by Close: %v, want os.ErrClosed", err)
	}
}

// TestPollableLeavesOthers: a regular file, a pipe that is also stderr, and
// a File the poller waits on already are returned as they are.
func TestPollableLeavesOthers(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if got := pollable(file, os.Stderr); got != file {
		t.Error("a regular file was made pollable")
	}
	r, _ := blockingPipe(t)
	defer r.Close()
	if got := pollable(r, r); got != r {
		t.Error("a pipe that is also stderr was made non-blocking (the logger writes stderr through a blocking os.Stderr)")
	}
	nr, nw, err := os.Pipe() // non-blocking, and polled already
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close()
	defer nw.Close()
	if got := pollable(nr, os.Stderr); got != nr {
		t.Error("a non-blocking pipe got a second File")
	}
}

// TestCloseEndsPollableRead: Close of a connection whose reader is a
// pollable pipe ends the read waiting in it, and Read says the connection
// ended (io.EOF) rather than that the file was closed: a gateway whose
// client closed stdout stops cleanly (go-sdk reports a read error before
// the write's EPIPE).
func TestCloseEndsPollableRead(t *testing.T) {
	for range 50 {
		r, w := blockingPipe(t)
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := (&Transport{Reader: pollable(r, out), Writer: out, Server: true}).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(context.Background())
			done <- err
		}()
		c.Close()
		if err := <-done; err != io.EOF {
			t.Fatalf("Read after Close: %v, want io.EOF", err)
		}
		w.Close()
	}
}

// TestPollableNonblockingBehindBlockingFile: a descriptor already
// non-blocking behind a blocking File (stdout on the socket stdin is on,
// once stdin was made pollable) gets a File the poller waits on: the
// blocking File's writes to a full pipe failed with EAGAIN.
func TestPollableNonblockingBehindBlockingFile(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	// Blocking Files, then the write end made non-blocking: os.Stdout of
	// a descriptor made non-blocking after the process started.
	r, w := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	defer r.Close()
	defer w.Close()
	if err := unix.SetNonblock(p[1], true); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 128<<10)); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("a blocking File's write to a full non-blocking pipe: %v, want EAGAIN (the case this is about)", err)
	}
	drained := 0
	for drained < 64<<10 {
		n, err := r.Read(make([]byte, 64<<10))
		if err != nil {
			t.Fatal(err)
		}
		drained += n
	}
	stderr := stderrFile(t)
	f := pollable(w, stderr)
	if err := f.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatalf("SetWriteDeadline: %v; want a pollable file", err)
	}
	// Fill the pipe, then drain it while a write waits for room.
	chunk := make([]byte, 64<<10)
	done := make(chan error, 1)
	go func() {
		for range 4 {
			if _, err := f.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- f.Close()
	}()
	buf := make([]byte, 64<<10)
	total := 0
	for total < 4*len(chunk) {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", total, err)
		}
		total += n
	}
	if err := <-done; err != nil {
		t.Fatalf("writes to a full pipe: %v, want them to wait for room", err)
	}
}

// TestRestoreStdio: the pipe pollable made non-blocking is blocking again
// after RestoreStdio, as the shell that started the gateway gave it (the
// command after the gateway in `{ toolgate serve; cat; } < fifo` read it
// with EAGAIN), and Close of the pollable file leaves the original open:
// it is what RestoreStdio reaches the pipe through.
func TestRestoreStdio(t *testing.T) {
	r, _ := blockingPipe(t)
	stderr := stderrFile(t)
	f := pollable(r, stderr)
	if !testenv.Nonblocking(t, r) {
		t.Fatal("pollable left the pipe blocking")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	RestoreStdio()
	if testenv.Nonblocking(t, r) {
		t.Fatal("the pipe is still non-blocking after RestoreStdio")
	}
}
