package local

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

func get(t *testing.T, sock string) (string, error) {
	t.Helper()
	resp, err := Client(sock, 5*time.Second).Get(URL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

var status = map[string]http.Handler{"GET /status": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"version":"x"}`) })}

// staleSocket leaves a socket file in dataDir's run/ that nobody listens
// on, as a gateway killed with SIGKILL does.
func staleSocket(t *testing.T, dataDir, name string) string {
	t.Helper()
	path := filepath.Join(dirs.Sockets(dataDir), name)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	return path
}

// A gateway's socket answers GET /status with the handler, owner-only; it
// is listed, and gone after Close. A socket nobody listens on (a gateway
// killed) is told apart, and the next Serve removes it.
func TestServe(t *testing.T) {
	data := t.TempDir()
	s := Serve(data, status, nil)
	if got := Sockets(data); !slices.Equal(got, []string{s.Path}) {
		t.Fatalf("Sockets = %v, want [%s]", got, s.Path)
	}
	if got, other := SocketsOf(data, os.Getpid()), SocketsOf(data, os.Getpid()+1); !slices.Equal(got, []string{s.Path}) || len(other) != 0 {
		t.Errorf("SocketsOf this process = %v, of another = %v; want [%s] and none", got, other, s.Path)
	}
	if body, err := get(t, s.Path); err != nil || body != `{"version":"x"}` {
		t.Fatalf("GET /status: %q, %v", body, err)
	}
	for path, want := range map[string]os.FileMode{dirs.Sockets(data): 0o700, s.Path: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
		}
	}
	resp, err := Client(s.Path, 5*time.Second).Post(URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /status: %s, want 405", resp.Status)
	}

	stale := staleSocket(t, data, "1-00000000.sock")
	if _, err := get(t, stale); !Gone(err) {
		t.Errorf("GET on a socket nobody listens on: %v, want one Gone says so", err)
	}
	if _, err := get(t, s.Path); Gone(err) {
		t.Errorf("Gone(%v) for a socket served", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := Sockets(data); !slices.Equal(got, []string{stale}) {
		t.Errorf("after Close: Sockets = %v, want the stale one only", got)
	}
	s2 := Serve(data, status, nil)
	defer s2.Close()
	if got := Sockets(data); !slices.Equal(got, []string{s2.Path}) {
		t.Errorf("after a new Serve: Sockets = %v, want [%s] (the stale one removed)", got, s2.Path)
	}
}

// The socket comes back by itself: after its folder is removed while
// serving, and once a data folder that did not exist at the start is made
// (never by Serve itself).
func TestServeMakesItAgain(t *testing.T) {
	data := t.TempDir()
	s := Serve(data, status, &Options{Retry: 10 * time.Millisecond})
	defer s.Close()
	// Moved away whole: RemoveAll could race the server making it again.
	if err := os.Rename(dirs.Sockets(data), filepath.Join(data, "gone")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the socket made again", s.Listening)
	if body, err := get(t, s.Path); err != nil || body != `{"version":"x"}` {
		t.Errorf("GET /status after the socket came back: %q, %v", body, err)
	}

	gone := filepath.Join(t.TempDir(), "gone")
	s2 := Serve(gone, status, &Options{Retry: 10 * time.Millisecond})
	defer s2.Close()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("Serve made the data folder: %v", err)
	}
	if got := Sockets(gone); got != nil {
		t.Errorf("Sockets of a data folder that does not exist = %v", got)
	}
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the socket made once the data folder is", s2.Listening)
	if _, err := get(t, s2.Path); err != nil {
		t.Errorf("GET /status: %v", err)
	}
}

// Renew makes a missing socket again at once, not at the next look (a
// gateway that opened the learned pairs in a data folder made again: the
// gateway whose store went with the old folder looks for its socket to
// hand its pairs over); after Close it makes nothing.
func TestServeRenew(t *testing.T) {
	data := t.TempDir()
	s := Serve(data, status, &Options{Retry: time.Hour})
	if err := os.Rename(dirs.Sockets(data), filepath.Join(data, "gone")); err != nil {
		t.Fatal(err)
	}
	s.Renew()
	if !s.Listening() {
		t.Fatal("no socket after Renew")
	}
	if _, err := get(t, s.Path); err != nil {
		t.Errorf("GET /status after Renew: %v", err)
	}
	s.Renew() // there already: the same socket
	if _, err := get(t, s.Path); err != nil {
		t.Errorf("GET /status after a second Renew: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.Renew()
	if s.Listening() {
		t.Error("Renew after Close made the socket")
	}
}

// While Refuse refuses (serve: a data folder that is another one than the
// gateway wrote in), no socket and no run/ folder are made; once it
// accepts, the socket is made again.
func TestServeRefused(t *testing.T) {
	data := t.TempDir()
	var refused atomic.Bool
	refused.Store(true)
	var asked atomic.Int32
	refuse := func() error {
		asked.Add(1)
		if refused.Load() {
			return errors.New("another folder")
		}
		return nil
	}
	s := Serve(data, status, &Options{Retry: 10 * time.Millisecond, Refuse: refuse})
	defer s.Close()
	testenv.Eventually(t, "two more tries", func() bool { return asked.Load() >= 3 })
	if _, err := os.Stat(dirs.Sockets(data)); !os.IsNotExist(err) {
		t.Fatalf("run/ made while refused: %v", err)
	}
	refused.Store(false)
	testenv.Eventually(t, "the socket made once accepted", s.Listening)
}

// A data folder whose path is longer than a unix socket's address takes
// (a deep home or CI workspace) gets its socket on Linux, reached through
// /proc/self/fd: it is listed, answers, a killed gateway's is removed, and
// Close removes it. It used to get none, so `toolgate status` said no
// gateway ran there. Elsewhere it gets none, and Close still works.
func TestServePathTooLong(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "linux" {
		s := Serve(long, status, nil)
		if s.Listening() || Sockets(long) != nil {
			t.Errorf("a socket on a path of %d bytes", len(s.Path))
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		return
	}
	if err := os.Mkdir(dirs.Sockets(long), 0o700); err != nil {
		t.Fatal(err)
	}
	// A killed gateway's socket, left in the folder.
	short, release, err := shortPath(filepath.Join(dirs.Sockets(long), "1-00000000.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", short)
	release()
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	s := Serve(long, status, nil)
	defer s.Close()
	if len(s.Path) <= maxPath {
		t.Fatalf("the socket's path is %d bytes: the test needs one over %d", len(s.Path), maxPath)
	}
	if got := Sockets(long); !slices.Equal(got, []string{s.Path}) {
		t.Fatalf("Sockets = %v, want [%s]", got, s.Path)
	}
	if body, err := get(t, s.Path); err != nil || body != `{"version":"x"}` {
		t.Fatalf("GET /status on a socket of %d bytes: %q, %v", len(s.Path), body, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := Sockets(long); len(got) != 0 {
		t.Errorf("after Close: Sockets = %v, want none", got)
	}
}

// A client is made per request (logs -f asks twice a second): no
// connection may stay open after its answer, on either side (each used to
// keep one, a descriptor of the gateway's, until the command ended).
func TestClientLeavesNoConnections(t *testing.T) {
	s := Serve(t.TempDir(), status, nil)
	defer s.Close()
	fds := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatalf("count descriptors: %v", err)
		}
		return len(es)
	}
	if _, err := get(t, s.Path); err != nil { // the server's goroutines up
		t.Fatal(err)
	}
	before := fds()
	for range 50 {
		if _, err := get(t, s.Path); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the connections closed", func() bool { return fds() < before+5 })
}

// A socket file appears only once it takes connections: a client that
// finds it (`toolgate status`, a gateway starting beside this one and
// removing stale sockets) is never refused. It used to be bound under its
// own name and listened on after, and a client in between was refused.
func TestSocketAppearsListening(t *testing.T) {
	data := t.TempDir()
	s := Serve(data, status, &Options{Retry: time.Millisecond})
	defer s.Close()
	for i := range 200 {
		// Moved away whole (RemoveAll would race the server making it
		// again, a millisecond later).
		if err := os.Rename(dirs.Sockets(data), filepath.Join(data, fmt.Sprintf("gone-%d", i))); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); !s.Listening(); runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatal("the socket not made again in 10s")
			}
		}
		c, err := net.Dial("unix", s.Path)
		if err != nil {
			t.Fatalf("dial the socket as soon as it is there: %v", err)
		}
		c.Close()
	}
}
