//go:build unix

package linerpc

import (
	"os"
	"testing"
)

// TestReaderGone: the write end of a pipe whose reader closed its end is
// seen at once, with nothing written; Stop ends a watch that saw nothing.
func TestReaderGone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	g := WatchReaderGone(w)
	defer g.Stop()
	r.Close()
	<-g.Gone() // hangs (the test's timeout) when it is not seen

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	defer w2.Close()
	g2 := WatchReaderGone(w2)
	g2.Stop()
	select {
	case <-g2.Gone():
		t.Error("Gone closed while the reader is there")
	default:
	}
	// A file has no reader to lose: never gone, and Stop returns.
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	WatchReaderGone(f).Stop()
}
