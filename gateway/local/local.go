// Package local lets the commands find the gateways that run on a data
// folder. Each `toolgate serve`, on stdio or HTTP, answers GET /status on a
// unix socket of its own in the data folder's run/ folder (dirs.Sockets),
// which only its user may open: an MCP client starts one gateway per stdio
// session, and none of them has an address `toolgate status` could ask.
//
// The socket serves the status report whole, with no API key: whoever can
// open it can read the data folder's files anyway.
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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/dirs"
)

// maxPath is the longest socket path Linux takes (sun_path holds 108
// bytes with the terminating NUL; macOS 104).
const maxPath = 103

// ext ends every socket's name: <pid>-<random>.sock.
const ext = ".sock"

// Server is one gateway's status socket.
type Server struct {
	Path string
	srv  *http.Server
}

// Listen serves status (GET /status) on a new socket in dataDir's run/
// folder, and removes the sockets there that nobody listens on any more
// (a gateway that was killed). The folder is made if need be, but never
// the data folder itself (a removed data folder is not made again behind
// the operator's back). The error says why there is no socket: the
// gateway serves on without one.
func Listen(dataDir string, status http.Handler, log *slog.Logger) (*Server, error) {
	dir := dirs.Sockets(dataDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	removeStale(dir, log)
	var b [4]byte
	_, _ = rand.Read(b[:])
	path := filepath.Join(dir, fmt.Sprintf("%d-%s%s", os.Getpid(), hex.EncodeToString(b[:]), ext))
	if len(path) > maxPath {
		return nil, fmt.Errorf("the socket's path %s is %d bytes long, longer than a unix socket takes (%d): give the data folder a shorter path (--data-dir), or serve --http and use toolgate status --addr",
			path, len(path), maxPath)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /status", status)
	s := &Server{Path: path, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops serving and removes the socket. A socket that cannot be
// removed (a read-only data folder) is no fault: nobody listens on it, and
// the next Listen on the folder removes it.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	err := s.srv.Close()
	_ = os.Remove(s.Path) // the listener unlinks it too, quietly
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

// Client is an HTTP client whose every request goes to the socket at path
// (the URL's host is ignored: use http://toolgate/status).
func Client(path string, timeout time.Duration) *http.Client {
	var d net.Dialer
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// URL is the status URL to ask a Client for.
const URL = "http://toolgate/status"

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
		c, err := net.DialTimeout("unix", path, time.Second)
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
