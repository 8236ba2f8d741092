//go:build unix

package testenv

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Nonblocking reports whether f's open file (a pipe's end, a socket) is in
// non-blocking mode, a flag every descriptor of it shares, without
// changing it (f.Fd would set it blocking).
func Nonblocking(t testing.TB, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(d uintptr) { flags, ferr = unix.FcntlInt(d, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}
