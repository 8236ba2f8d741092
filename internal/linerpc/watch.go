package linerpc

import (
	"io"
	"os"
	"sync"
)

// watchLimit is how much a Watch keeps of what it reads before a reader
// takes over; past it, it stops reading (and so stops watching).
const watchLimit = 1 << 20

// Watched is a reader read in the background from the moment it is
// watched until a reader takes over (its first Read): a stdio server that
// takes a while to start (a cold start connects every backend first) sees
// its client close stdin at once, through Ended, rather than only once it
// serves.
//
// What the watch reads is kept and read first, in order; after that, Read
// reads the watched reader directly. The watch stops once a reader has
// taken over, when the reader ends, or when it keeps watchLimit bytes
// unread.
type Watched struct {
	r     io.ReadCloser
	ended chan struct{}

	mu       sync.Mutex
	cond     *sync.Cond
	buf      []byte
	err      error // r's error, once the watch read it
	watching bool  // the watch goroutine is reading
	taken    bool  // a Read has taken over
	closed   bool
}

// Watch starts watching r.
func Watch(r io.ReadCloser) *Watched {
	w := &Watched{r: r, ended: make(chan struct{}), watching: true}
	w.cond = sync.NewCond(&w.mu)
	go w.watch()
	return w
}

// WatchStdin watches stdin (through the poller when it is a pipe or a
// socket: pollable).
func WatchStdin() *Watched { return Watch(stdin()) }

func (w *Watched) watch() {
	chunk := make([]byte, 32<<10)
	for {
		n, err := w.r.Read(chunk)
		w.mu.Lock()
		w.buf = append(w.buf, chunk[:n]...)
		if err != nil {
			w.err = err
			close(w.ended)
		}
		stop := err != nil || w.taken || w.closed || len(w.buf) >= watchLimit
		if stop {
			w.watching = false
		}
		w.cond.Broadcast()
		w.mu.Unlock()
		if stop {
			return
		}
	}
}

// Ended is closed when the watch reads the end of the reader (EOF or an
// error): the client has gone. It is not closed for an end that a Read
// sees after the watch stopped.
func (w *Watched) Ended() <-chan struct{} { return w.ended }

// Read reads what the watch kept, then the reader itself.
func (w *Watched) Read(p []byte) (int, error) {
	w.mu.Lock()
	w.taken = true
	for w.watching && len(w.buf) == 0 && !w.closed {
		w.cond.Wait()
	}
	switch {
	case len(w.buf) > 0:
		n := copy(p, w.buf)
		w.buf = w.buf[n:]
		w.mu.Unlock()
		return n, nil
	case w.closed:
		w.mu.Unlock()
		return 0, os.ErrClosed
	case w.err != nil:
		err := w.err
		w.mu.Unlock()
		return 0, err
	}
	w.mu.Unlock()
	return w.r.Read(p)
}

// Close closes the reader and ends a Read waiting on the watch.
func (w *Watched) Close() error {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	return w.r.Close()
}
