package testenv

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DropRelay is a TCP relay between a client and a server, standing for
// the network (or a proxy) in between. Blackhole makes it drop the network
// silently, as a Wi-Fi that went away, a VPN that reconnected or a NAT that
// forgot the connection do: bytes either way vanish, with no RST and no
// FIN, and a new connection is taken and answered nothing. Clearing it
// makes it carry bytes again (connections made meanwhile stay dead, as
// they would). While Refuse is set, a new connection is closed at once.
// One made by NewIdleCutRelay also closes a connection that carried no
// byte from the server for its idle limit, as a reverse proxy's read
// timeout (nginx's proxy_read_timeout) or a load balancer's idle timeout
// does.
type DropRelay struct {
	Blackhole atomic.Bool
	Refuse    atomic.Bool
	// Down counts the reads that carried bytes from the server to the
	// client; Cut the connections closed for the idle limit.
	Down, Cut atomic.Int64

	ln      net.Listener
	to      string
	idleCut time.Duration
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

// NewDropRelay relays to the address to; it stops when t ends.
func NewDropRelay(t testing.TB, to string) *DropRelay {
	t.Helper()
	return NewIdleCutRelay(t, to, 0)
}

// NewIdleCutRelay is NewDropRelay whose connections are closed once the
// server sent nothing for idleCut (0: never).
func NewIdleCutRelay(t testing.TB, to string, idleCut time.Duration) *DropRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &DropRelay{ln: ln, to: to, idleCut: idleCut}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.Close)
	return r
}

// Addr is the relay's host:port.
func (r *DropRelay) Addr() string { return r.ln.Addr().String() }

// URL is u with its host replaced by the relay's address.
func (r *DropRelay) URL(u, host string) string {
	return strings.Replace(u, host, r.Addr(), 1)
}

func (r *DropRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if r.Refuse.Load() {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
		if r.Blackhole.Load() {
			r.wg.Add(1)
			go func() { defer r.wg.Done(); io.Copy(io.Discard, c) }()
			continue
		}
		up, err := net.Dial("tcp", r.to)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, up)
		r.mu.Unlock()
		var idle *time.Timer
		if r.idleCut > 0 {
			idle = time.AfterFunc(r.idleCut, func() {
				r.Cut.Add(1)
				c.Close()
				up.Close()
			})
		}
		r.wg.Add(2)
		go func() { defer r.wg.Done(); r.pipe(up, c, nil) }()
		go func() {
			defer r.wg.Done()
			r.pipe(c, up, func() {
				r.Down.Add(1)
				if idle != nil {
					idle.Reset(r.idleCut)
				}
			})
			if idle != nil {
				idle.Stop()
			}
		}()
	}
}

// pipe copies from src to dst while the network carries bytes (calling
// carried, if set, for each read that did), and swallows them once it is a
// blackhole.
func (r *DropRelay) pipe(dst, src net.Conn, carried func()) {
	buf := make([]byte, 32<<10)
	dead := false
	for {
		n, err := src.Read(buf)
		if n > 0 && !dead {
			if r.Blackhole.Load() {
				dead = true // this connection stays dead, as after a real drop
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			} else if carried != nil {
				carried()
			}
		}
		if err != nil {
			if !dead && !r.Blackhole.Load() {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
			}
			return
		}
	}
}

// Close stops the relay and closes every connection it made.
func (r *DropRelay) Close() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
