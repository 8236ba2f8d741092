package testenv

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// AsAnotherUser runs f, on one thread, as a user whom files the test made
// of mode 0000 (or 0600 and root's), or folders of mode 0555, refuse: when
// the test runs as root (who may open anything), its file-system uid is
// NobodyUID's for f; any other user is refused by those modes already.
// Only what f does on its own goroutine counts.
func AsAnotherUser(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if os.Geteuid() == 0 {
		syscall.Syscall(syscall.SYS_SETFSUID, NobodyUID, 0, 0)
		defer syscall.Syscall(syscall.SYS_SETFSUID, 0, 0, 0)
	}
	f()
}

// CopyFile copies the file from to to, made with mode.
func CopyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
