package gateway

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/storage"
)

// acceptReport is how often a fault of accept is logged again while it
// lasts (with how long it has lasted).
const acceptReport = 10 * time.Second

// acceptMaxDelay caps the wait between two accepts refused for want of a
// resource (the same back-off as net/http's: 5 ms, doubling, up to 1 s).
const acceptMaxDelay = time.Second

// acceptListener is the HTTP front's listener. When the system refuses a
// new connection's descriptor (EMFILE, ENFILE, ENOBUFS, ENOMEM: too many
// clients, servers or files open for the open-files limit), it waits and
// tries again itself, as net/http would, but logs the fault once with its
// fix, again every acceptReport while it lasts, and once when it is over,
// instead of net/http's "http: Accept error" line at every try (up to one a
// second, without a fix). Connections that come meanwhile wait in the
// kernel's queue and are served as descriptors free up. Under load the
// fault flickers (each connection that closes lets one more in), so it is
// over only at an accept that comes acceptReport after the last refusal:
// one fault, not a line per connection.
type acceptListener struct {
	net.Listener
	log      *slog.Logger
	now      func() time.Time
	maxDelay time.Duration // acceptMaxDelay; shorter in tests

	closeOnce sync.Once
	closed    chan struct{}

	mu       sync.Mutex
	since    time.Time // when the current fault began; zero when there is none
	last     time.Time // the fault's latest refusal
	reported time.Time // when the fault was last logged
	refused  int       // accepts refused in the current fault
}

func newAcceptListener(ln net.Listener, log *slog.Logger) *acceptListener {
	return &acceptListener{Listener: ln, log: log, now: time.Now, maxDelay: acceptMaxDelay, closed: make(chan struct{})}
}

// acceptExhausted reports whether err is an accept refused for want of a
// descriptor or memory, which frees up by itself once connections close.
func acceptExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// acceptFix is what the operator does about an accept refused for err.
func acceptFix(err error) string {
	if errors.Is(err, syscall.ENFILE) {
		return storage.ShortageFix(syscall.ENFILE)
	}
	if errors.Is(err, syscall.EMFILE) {
		return storage.ShortageFix(syscall.EMFILE) + ", or have fewer clients connected or servers configured"
	}
	return "the system is short of memory for a new connection: free memory, or have fewer clients connected"
}

func (l *acceptListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil || !acceptExhausted(err) {
			if err == nil {
				l.accepted()
			}
			return c, err
		}
		l.refuse(err)
		delay = min(max(2*delay, 5*time.Millisecond), l.maxDelay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.closed:
			t.Stop()
			// The next Accept returns the listener's own error.
		}
	}
}

func (l *acceptListener) refuse(err error) {
	now := l.now()
	l.mu.Lock()
	first := l.since.IsZero()
	if first {
		l.since, l.refused = now, 0
	}
	l.refused++
	l.last = now
	again := !first && now.Sub(l.reported) >= acceptReport
	if first || again {
		l.reported = now
	}
	since, refused := l.since, l.refused
	l.mu.Unlock()
	switch {
	case first:
		l.log.Error("the HTTP front cannot accept connections: new clients wait until some close", "addr", l.Addr().String(), "err", err, "fix", acceptFix(err))
	case again:
		l.log.Warn("the HTTP front still cannot accept all connections", "addr", l.Addr().String(), "for", now.Sub(since).Round(time.Second), "tries", refused, "err", err, "fix", acceptFix(err))
	}
}

// accepted ends the fault at an accept that comes acceptReport after its
// last refusal.
func (l *acceptListener) accepted() {
	now := l.now()
	l.mu.Lock()
	if l.since.IsZero() || now.Sub(l.last) < acceptReport {
		l.mu.Unlock()
		return
	}
	lasted, refused := l.last.Sub(l.since), l.refused
	l.since = time.Time{}
	l.mu.Unlock()
	l.log.Info("the HTTP front accepts connections again", "addr", l.Addr().String(), "fault_lasted", lasted.Round(time.Millisecond), "tries", refused)
}

func (l *acceptListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}
