package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestServeNotifiesSystemd: under a systemd unit of Type=notify
// ($NOTIFY_SOCKET), serve --http says READY=1 once it answers (a unit
// ordered after it starts then, not while the index is built) and
// STOPPING=1 when a stop begins. Without it, Type=notify timed out and
// Type=simple called the gateway started before it answered anything.
func TestServeNotifiesSystemd(t *testing.T) {
	dir, err := os.MkdirTemp("", "tg-sd") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the notify socket closed before %s", what)
			}
			return m
		case <-time.After(3 * time.Minute):
			t.Fatalf("no notification %s", what)
		}
		return ""
	}

	cfg := fakeConfig(t, map[string]string{"fake": ""}, nil)
	addr := freeAddr(t)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr, "--mode", "bm25")
	cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+sock)
	var logs testenv.LogBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := next("at start")
	if !strings.Contains(ready, "READY=1") || !strings.Contains(ready, "STATUS=serving ") {
		t.Fatalf("first notification %q, want READY=1 with a STATUS", ready)
	}
	// Ready means answered: no wait for the front.
	if r := get(t, "http://"+addr+"/healthz", ""); r.StatusCode != 200 {
		t.Errorf("GET /healthz after READY=1: %s, want 200", r.Status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next("at the stop"); !strings.Contains(m, "STOPPING=1") {
		t.Errorf("notification at the stop %q, want STOPPING=1", m)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve stopped with %v, want status 0\n%s", err, logs.String())
	}
}
