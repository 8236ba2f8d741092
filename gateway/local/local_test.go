package local

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/dirs"
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

// A gateway's socket answers GET /status with the handler, owner-only; it
// is listed, and gone after Close. A socket nobody listens on (a gateway
// killed) is told apart, and the next Listen removes it.
func TestListen(t *testing.T) {
	data := t.TempDir()
	status := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"version":"x"}`) })
	s, err := Listen(data, status, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := Sockets(data); !slices.Equal(got, []string{s.Path}) {
		t.Fatalf("Sockets = %v, want [%s]", got, s.Path)
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

	// A killed gateway's socket: the file stays, nobody listens.
	stale := filepath.Join(dirs.Sockets(data), "1-00000000.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
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
	s2, err := Listen(data, status, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := Sockets(data); !slices.Equal(got, []string{s2.Path}) {
		t.Errorf("after a new Listen: Sockets = %v, want [%s] (the stale one removed)", got, s2.Path)
	}
}

// A data folder whose path is too long for a socket gets an error that
// says so and what to do; a removed data folder is not made again.
func TestListenRefused(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(long, http.NotFoundHandler(), nil); err == nil || !strings.Contains(err.Error(), "shorter path") {
		t.Errorf("Listen on a long path: %v", err)
	}
	gone := filepath.Join(t.TempDir(), "gone")
	if _, err := Listen(gone, http.NotFoundHandler(), nil); err == nil {
		t.Error("Listen on a removed data folder succeeded")
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the removed data folder was made again: %v", err)
	}
	if got := Sockets(gone); got != nil {
		t.Errorf("Sockets of a removed data folder = %v", got)
	}
}
