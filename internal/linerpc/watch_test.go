package linerpc

import (
	"errors"
	"io"
	"os"
	"testing"
)

// TestWatchSeesEndBeforeAnyRead: the reader's end is seen while nobody
// reads (a client that hangs up while the gateway starts), and what came
// before it is still read first, in order.
func TestWatchSeesEndBeforeAnyRead(t *testing.T) {
	pr, pw := io.Pipe()
	w := Watch(pr)
	if _, err := io.WriteString(pw, "first\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(pw, "second\n"); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	<-w.Ended()
	got, err := io.ReadAll(w)
	if err != nil || string(got) != "first\nsecond\n" {
		t.Fatalf("read %q, %v; want both lines then EOF", got, err)
	}
}

// TestWatchHandsOver: once a reader takes over, the watch stops and reads
// go to the reader itself, in order; an end seen then is not the watch's.
func TestWatchHandsOver(t *testing.T) {
	pr, pw := io.Pipe()
	w := Watch(pr)
	go func() {
		for _, s := range []string{"a", "b", "c"} {
			if _, err := io.WriteString(pw, s); err != nil {
				return
			}
		}
		pw.Close()
	}()
	got, err := io.ReadAll(w)
	if err != nil || string(got) != "abc" {
		t.Fatalf("read %q, %v; want abc", got, err)
	}
	w.mu.Lock()
	watching := w.watching
	w.mu.Unlock()
	if watching {
		t.Error("still watching after a reader took over and read to the end")
	}
}

// TestWatchCloseEndsWaitingRead: Close ends a Read waiting on the watch.
func TestWatchCloseEndsWaitingRead(t *testing.T) {
	pr, _ := io.Pipe()
	w := Watch(pr)
	done := make(chan error, 1)
	go func() {
		_, err := w.Read(make([]byte, 8))
		done <- err
	}()
	w.Close()
	if err := <-done; !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Read after Close: %v", err)
	}
}
