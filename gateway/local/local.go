// Package local lets the commands find the gateways that run on a data
// folder. Each `toolgate serve`, on stdio or HTTP, answers on a unix
// socket of its own in the data folder's run/ folder (dirs.Sockets), which
// only its user may open: an MCP client starts one gateway per stdio
// session, and none of them has an address `toolgate status` or `toolgate
// logs` could ask.
//
// The socket serves its routes (GET /status, GET /logs, …) whole, with no API
// key: whoever can open it can read the data folder's files anyway.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/dirs"
)

// maxPath is the longest socket path Linux takes (sun_path holds 108
// bytes with the terminating NUL; macOS 104).
const maxPath = 103

// viaProc says whether a socket whose path is longer than maxPath is
// reached through /proc/self/fd (Linux): a socket's address is the path
// the kernel is given, and that one is short.
const viaProc = runtime.GOOS == "linux"

// shortPath is path as bind and connect take it: itself when it is short
// enough, else (on Linux) /proc/self/fd/N/<its name>, N a descriptor of its
// folder, held until release. A data folder deep in a home or a CI
// workspace used to get no socket, so `toolgate status` said that no
// gateway ran on it.
func shortPath(path string) (string, func(), error) {
	if len(path) <= maxPath || !viaProc {
		return path, func() {}, nil
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", nil, err
	}
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	if len(short) > maxPath {
		dir.Close()
		return "", nil, fmt.Errorf("the socket's name %s is too long for a unix socket", filepath.Base(path))
	}
	return short, func() { dir.Close() }, nil
}

// ext ends every socket's name: <pid>-<random>.sock.
const ext = ".sock"

// DefaultRetry is Options.Retry's default: how often a Server without its
// socket (the data folder removed, read-only, full) tries to make it
// again, the data folder's other stores' interval.
const DefaultRetry = 10 * time.Second

// Options configure Serve. Nil means defaults.
type Options struct {
	Logger *slog.Logger
	Retry  time.Duration // default DefaultRetry
	// Refuse, if set, is asked before the socket is made (again): an
	// error leaves it unmade, as a failure to make it does (serve passes
	// storage.Health.Replaced: a data folder that is another one than
	// the gateway wrote in gets no socket).
	Refuse func() error
}

// Server is one gateway's status socket.
type Server struct {
	Path string // where the socket is, or is made again
	srv  *http.Server
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}

	retry  time.Duration
	refuse func() error

	mu      sync.Mutex
	ln      net.Listener // the socket served, once made
	lastErr string       // the last fault logged ("" while serving)
	closed  bool         // Close ran: nothing is made again
}

// Serve serves routes (patterns of http.ServeMux: "GET /status") on a new
// socket in dataDir's run/
// folder, and removes the sockets there that nobody listens on any more
// (a gateway that was killed). The folder is made if need be, but never
// the data folder itself (a removed data folder is not made again behind
// the operator's back). While the socket cannot be made (the folder
// removed, read-only, full), or once it is gone (the folder removed while
// serving), it is tried again every Options.Retry; each fault is logged
// once, and so is the socket's return.
func Serve(dataDir string, routes map[string]http.Handler, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.Handle(pattern, h)
	}
	s := &Server{
		Path: filepath.Join(dirs.Sockets(dataDir), fmt.Sprintf("%d-%s%s", os.Getpid(), hex.EncodeToString(b[:]), ext)),
		log:  o.Logger, stop: make(chan struct{}), done: make(chan struct{}), retry: o.Retry, refuse: o.Refuse,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Minute},
	}
	if len(s.Path) > maxPath && !viaProc {
		s.log.Warn("no status socket in the data folder: `toolgate status` finds this gateway only at its --http address", "err",
			fmt.Sprintf("the socket's path %s is %d bytes long, longer than a unix socket takes (%d)", s.Path, len(s.Path), maxPath),
			"fix", "give the data folder a shorter path (--data-dir), or serve --http and use toolgate status --addr")
		close(s.done)
		return s
	}
	s.listen()
	go s.keep()
	return s
}

// Listening says whether the socket is there to be asked (a test's wait).
func (s *Server) Listening() bool {
	fi, err := os.Lstat(s.Path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// listen makes the socket and serves on it, or logs why it cannot (once
// per reason).
func (s *Server) listen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.ln != nil && s.Listening() {
		return // Renew and keep both looked
	}
	err := s.tryListen()
	switch {
	case err == nil && s.lastErr != "":
		s.log.Info("status socket in the data folder made again: `toolgate status` finds this gateway", "socket", s.Path)
		s.lastErr = ""
	case err != nil && err.Error() != s.lastErr:
		s.log.Warn("no status socket in the data folder: `toolgate status` finds this gateway only at its --http address; tried again every "+s.retry.String(),
			"socket", s.Path, "err", err)
		s.lastErr = err.Error()
	}
}

// tryListen makes the socket and serves on it; s.mu is held.
func (s *Server) tryListen() error {
	if s.refuse != nil {
		if err := s.refuse(); err != nil {
			return err
		}
	}
	dir := filepath.Dir(s.Path)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	removeStale(dir, s.log)
	if s.ln != nil {
		s.ln.Close() // its file is gone: nobody reaches it
		s.ln = nil
	}
	// Bound under another name and renamed once listening: a socket file
	// appears only when it takes connections (between bind and listen it
	// refuses them, and a gateway starting beside this one would remove it
	// as stale; a test waiting on Listening would be refused).
	tmp := strings.TrimSuffix(s.Path, ext) + ".new"
	_ = os.Remove(tmp)
	short, release, err := shortPath(tmp)
	if err != nil {
		return err
	}
	ln, err := net.Listen("unix", short)
	release()
	if err != nil {
		return err
	}
	// Close removes the file; a listener closed for a new one must not
	// remove the new one's.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	err = os.Chmod(tmp, 0o600)
	if err == nil {
		err = os.Rename(tmp, s.Path)
	}
	if err != nil {
		ln.Close()
		os.Remove(tmp)
		return err
	}
	s.ln = ln
	go func() { _ = s.srv.Serve(ln) }() // srv.Close closes every listener served
	return nil
}

// Renew makes the socket again now if it is missing, rather than at the
// next look (every Options.Retry): the data folder was made again.
func (s *Server) Renew() {
	select {
	case <-s.done:
		return // never made (too long a path), or closed
	default:
	}
	if !s.Listening() {
		s.listen()
	}
}

// keep makes the socket again whenever it is missing.
func (s *Server) keep() {
	defer close(s.done)
	t := time.NewTicker(s.retry)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if !s.Listening() {
			s.listen()
		}
	}
}

// Close stops serving and removes the socket. A socket that cannot be
// removed (a read-only data folder) is no fault: nobody listens on it, and
// the next Serve on the folder removes it.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
	default:
		close(s.stop)
		<-s.done
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.srv.Close()
	s.mu.Lock()
	if s.ln != nil {
		_ = os.Remove(s.Path)
	}
	s.mu.Unlock()
	return err
}

// Sockets lists the status sockets in dataDir's run/ folder, sorted (those
// of gateways that were killed included: Get on them says so).
func Sockets(dataDir string) []string {
	entries, err := os.ReadDir(dirs.Sockets(dataDir))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ext) && e.Type()&os.ModeSocket != 0 {
			out = append(out, filepath.Join(dirs.Sockets(dataDir), e.Name()))
		}
	}
	slices.Sort(out)
	return out
}

// SocketsOf lists the status sockets on dataDir of the process pid (one,
// unless a killed gateway's PID came back).
func SocketsOf(dataDir string, pid int) []string {
	prefix := strconv.Itoa(pid) + "-"
	return slices.DeleteFunc(Sockets(dataDir), func(s string) bool { return !strings.HasPrefix(filepath.Base(s), prefix) })
}

// Unreadable says why dataDir's sockets cannot be listed when its run/
// folder is there but cannot be read (another user's gateways: the folder
// is its owner's only), or nil.
func Unreadable(dataDir string) error {
	_, err := os.ReadDir(dirs.Sockets(dataDir))
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Client is an HTTP client whose every request goes to the socket at path
// (the URL's host is ignored: use URL and LogsURL).
func Client(path string, timeout time.Duration) *http.Client {
	var d net.Dialer
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			short, release, err := shortPath(path)
			if err != nil {
				return nil, err
			}
			defer release()
			return d.DialContext(ctx, "unix", short)
		},
		// One request a connection: a client is made per request (logs -f
		// twice a second), and an idle connection kept by each held a
		// descriptor of the gateway's until the command ended.
		DisableKeepAlives: true,
	}}
}

// URL is the status URL to ask a Client for; LogsURL the log's; LearnURL
// the learned pairs' (`toolgate learn`); LogLevelURL the log's level
// (`toolgate logs --level`).
const (
	URL         = "http://toolgate/status"
	LogsURL     = "http://toolgate/logs"
	LearnURL    = "http://toolgate/learn"
	LogLevelURL = "http://toolgate/loglevel"
)

// Gone says that err, from a request through Client, means nobody listens
// on the socket: its gateway was killed (or has just stopped).
func Gone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist)
}

// removeStale removes the sockets in dir that refuse a connection.
func removeStale(dir string, log *slog.Logger) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ext) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		short, release, err := shortPath(path)
		if err != nil {
			continue
		}
		c, err := net.DialTimeout("unix", short, time.Second)
		release()
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			if err := os.Remove(path); err == nil && log != nil {
				log.Debug("removed the status socket of a gateway that is gone", "socket", path)
			}
		}
	}
}
