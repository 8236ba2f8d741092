package backend

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// everythingServer returns a config entry for the pinned npm
// @modelcontextprotocol/server-everything installed under examples/servers
// (scripts/install-servers.sh). Missing: skip locally, fail on CI.
func everythingServer(t *testing.T) config.Server {
	t.Helper()
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("servers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	_, statErr := os.Stat(filepath.Join(examples, script))
	_, nodeErr := exec.LookPath("node")
	if err := errors.Join(statErr, nodeErr); err != nil {
		testenv.Missing(t, "real npm server missing (run scripts/install-servers.sh): %v", err)
	}
	return config.Server{Name: "everything", Type: config.TypeStdio, Command: "node", Args: []string{script, "stdio"}, Cwd: examples}
}

func TestRealServer(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_SECRET", "must-not-leak-123")
	srv := everythingServer(t)
	o := testOptions(nil)
	o.RestartDelays = []time.Duration{200 * time.Millisecond}
	p := startPool(t, []config.Server{srv}, o)
	st := statusOf(t, p, "everything")
	if st.State != StateUp {
		t.Fatalf("state %s: %s", st.State, st.Err)
	}
	ctx := context.Background()

	t.Run("echo", func(t *testing.T) {
		res, err := p.CallTool(ctx, "everything", "echo", map[string]any{"message": "hi"})
		if err != nil || !strings.Contains(textOf(t, res), "hi") {
			t.Fatalf("echo = %v, %v", res, err)
		}
	})
	t.Run("env allowlist", func(t *testing.T) {
		res, err := p.CallTool(ctx, "everything", "get-env", nil)
		if err != nil {
			t.Fatal(err)
		}
		if env := textOf(t, res); strings.Contains(env, "must-not-leak-123") || !strings.Contains(env, "PATH") {
			t.Errorf("child environment: %s", env)
		}
	})
	t.Run("killed mid-call, restarted", func(t *testing.T) {
		errc := make(chan error, 1)
		go func() {
			_, err := p.CallTool(ctx, "everything", "trigger-long-running-operation", map[string]any{"duration": 60, "steps": 5})
			errc <- err
		}()
		testenv.Eventually(t, "the long call in flight", func() bool { return inFlight(t, p, "everything") == 1 })
		if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var ue *UnavailableError
		if err := <-errc; !errors.As(err, &ue) {
			t.Fatalf("err = %v, want UnavailableError", err)
		}
		testenv.Eventually(t, "serving again after the first backoff", func() bool {
			s := statusOf(t, p, "everything")
			return s.State == StateUp && s.PID != st.PID
		})
		res, err := p.CallTool(ctx, "everything", "echo", map[string]any{"message": "again"})
		if err != nil || !strings.Contains(textOf(t, res), "again") {
			t.Fatalf("echo after restart = %v, %v", res, err)
		}
	})
}
