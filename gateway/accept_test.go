//go:build linux

package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAcceptOutOfDescriptors: when the HTTP front cannot accept a
// connection because toolgate has no file descriptors left, the log says so
// once, with the fix (the open-files limit); the client that waited
// meanwhile is served once descriptors are free. It used to be
// net/http's "http: Accept error: … too many open files; retrying in 1s" at
// every try, one a second for as long as it lasted, without a fix. The test
// lowers its own process's soft limit and fills it, so it must not run in
// parallel.
func TestAcceptOutOfDescriptors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "served")
		}), nil, logs.Logger(), nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	// The client's socket is made first: connect needs no new descriptor.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := os.NewFile(uintptr(fd), "client")
	defer client.Close()

	// Held: an accept needs one descriptor, and one freed by anything else
	// (a finalizer, an earlier test's connection) would let it through.
	release := testenv.HoldDescriptors(t)
	port := ln.Addr().(*net.TCPAddr).Port
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("connect (the kernel queues it, no accept needed): %v", err)
	}
	testenv.Eventually(t, "the refused accept logged", func() bool {
		return strings.Contains(logs.String(), "cannot accept connections")
	})
	if got := logs.String(); !strings.Contains(got, "open-files limit") || !strings.Contains(got, "LimitNOFILE") {
		t.Errorf("the log does not name the fix:\n%s", got)
	}
	release()
	conn, err := net.FileConn(client)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the client that waited is not served: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
	if got := logs.String(); strings.Count(got, "cannot accept") != 1 || strings.Contains(got, "Accept error") {
		t.Errorf("want the fault logged once, without net/http's own line:\n%s", got)
	}
}

// fakeListener answers Accept from a script: true accepts conn, false
// refuses with err; tick moves the test's clock at each call.
type fakeListener struct {
	net.Listener
	mu     sync.Mutex
	script []bool
	err    error
	conn   net.Conn
	tick   func(accepted bool)
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := len(f.script) == 0 || f.script[0]
	if len(f.script) > 0 {
		f.script = f.script[1:]
	}
	f.tick(ok)
	if !ok {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", f.err)}
	}
	return f.conn, nil
}

func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8931} }

// TestAcceptFaultLoggedOncePerInterval: a fault of accept that lasts, and
// flickers as connections close and let one more in, is logged when it
// starts, then once every 10 s with how long it has lasted, then once at
// an accept 10 s after its last refusal; not once per connection.
func TestAcceptFaultLoggedOncePerInterval(t *testing.T) {
	var logs testenv.LogBuffer
	now := time.Unix(0, 0)
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	// 100 s of refusals, one a second, each followed by an accept.
	var script []bool
	for range 100 {
		script = append(script, false, true)
	}
	fl := &fakeListener{script: script, err: syscall.EMFILE, conn: c1, tick: func(accepted bool) {
		if !accepted {
			now = now.Add(time.Second)
		}
	}}
	l := newAcceptListener(fl, logs.Logger())
	l.now = func() time.Time { return now }
	l.maxDelay = time.Microsecond
	for range 100 {
		if c, err := l.Accept(); err != nil || c != c1 {
			t.Fatalf("Accept = %v, %v; want the connection after a refusal", c, err)
		}
	}
	got := logs.String()
	if n := strings.Count(got, "cannot accept"); n != 1+9 || strings.Contains(got, "accepts connections again") {
		t.Errorf("over 100 s of refusals between accepts: logged %d times (want the first, then one per 10 s: 10) and not over:\n%s", n, got)
	}
	now = now.Add(9 * time.Second)
	l.Accept()
	if strings.Contains(logs.String(), "accepts connections again") {
		t.Errorf("over 9 s after the last refusal, want 10:\n%s", logs.String())
	}
	now = now.Add(time.Second)
	l.Accept()
	l.Accept()
	if got := logs.String(); strings.Count(got, "accepts connections again") != 1 || !strings.Contains(got, "tries=100") || !strings.Contains(got, "fault_lasted=1m39s") {
		t.Errorf("want the end of the fault once (1m39s, 100 tries):\n%s", got)
	}
}
