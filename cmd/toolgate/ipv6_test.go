package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestConfigPortZeroFound: a config whose toolgate.http.addr has port 0
// ("[::1]:0": the gateway takes a free port at each start, on IPv6
// loopback) is reached by `toolgate connect -c`, `health -c` and `status
// -c` at the port the gateway took, found by its status socket; they
// asked port 0 itself ("nothing listens at [::1]:0"). Each also sends
// $TOOLGATE_KEY, which took status to the front at port 0.
func TestConfigPortZeroFound(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, map[string]any{"http": map[string]any{"addr": "[::1]:0"}})
	cmd := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	cmd.Stderr = testLog(t, "toolgate: ")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var addr string
	testenv.Eventually(t, "the gateway's front on its status socket", func() bool {
		for _, lg := range localGateways(context.Background(), data, time.Second) {
			if p := lg.rep.Process; lg.err == nil && p != nil && p.Addr != "" {
				addr = p.Addr
				return true
			}
		}
		return false
	})
	if host, port, _ := net.SplitHostPort(addr); host != "::1" || port == "0" {
		t.Fatalf("the gateway's address %q, want [::1] and the port it took", addr)
	}
	waitHealthy(t, "http://"+addr+"/healthz", time.Minute)

	u, _, err := bridgeURL(context.Background(), &globals{dataDir: data, logger: slog.New(slog.DiscardHandler)}, connectFlags{config: cfg})
	if want := "http://" + addr + "/mcp"; err != nil || u != want {
		t.Errorf("connect -c with port 0: %q, %v; want %s", u, err, want)
	}
	t.Setenv(envKey, "tg_none")
	for _, args := range [][]string{{"health", "-c", cfg}, {"status", "-c", cfg}} {
		stdout, stderr, err := runToolgate(t, data, args...)
		if err != nil || !strings.Contains(stdout, addr) {
			t.Errorf("%s with port 0: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
	}
}
