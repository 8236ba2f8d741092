package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
)

// TestStatusNamesGatewayWithoutSocket: `toolgate status`, `health` and
// `logs` on a data folder whose stores an older gateway holds (one from
// before the status sockets, 2026-12-03, still running while a newer
// toolgate is tried beside it, or after a rollback) name that process
// and its command line, which holds its --http address. They said `no
// gateway runs on the data folder`, which was false. A lock left by a
// process that is gone is passed over as before.
func TestStatusNamesGatewayWithoutSocket(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	// The stand-in for the older gateway: a live process whose PID is in
	// the stores' locks, with no status socket.
	holder := exec.Command("sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	pid := strconv.Itoa(holder.Process.Pid)
	for _, dir := range []string{learnDirIn(data), dirs.EmbeddingCache(data)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "LOCK"), []byte(pid+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	free := freeAddr(t)
	dataDir := func(*config.File) string { return data }
	want := "no gateway on the data folder " + data + " has a status socket, but pid " + pid + " holds its learned pairs and embedding cache (sleep 600)"

	var out bytes.Buffer
	err := runStatus(context.Background(), &out, statusFlags{dataDir: dataDir, timeout: 2 * time.Second, fallback: free})
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "no gateway runs on the data folder") {
		t.Errorf("status beside a gateway without a socket: %v\nwant it to say %q", err, want)
	}
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runHealth(context.Background(), &out, healthFlags{config: cfg, dataDir: dataDir, timeout: 2 * time.Second, fallback: free})
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "either") {
		t.Errorf("health beside a gateway without a socket: %v\nwant it to say %q", err, want)
	}
	err = runLogs(context.Background(), &out, &out, data, logsFlags{})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("logs beside a gateway without a socket: %v\nwant it to say %q", err, want)
	}

	// The holder gone (a crash leaves Badger's LOCK behind): no gateway.
	_ = holder.Process.Kill()
	_ = holder.Wait()
	err = runStatus(context.Background(), &out, statusFlags{dataDir: dataDir, timeout: 2 * time.Second, fallback: free})
	if err == nil || !strings.Contains(err.Error(), "no gateway runs on the data folder "+data+" either") {
		t.Errorf("status after the holder ended: %v", err)
	}
}
