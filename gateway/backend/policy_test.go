package backend

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A server's own restart policy (config.Server.Restart) overrides the pool's.
func TestPerServerRestartPolicy(t *testing.T) {
	o := testOptions(nil)
	o.RestartDelays = []time.Duration{time.Hour} // the pool's: would never restart within the test
	never := named(backendtest.Command(t, "crash-mid-call"), "never")
	never.Restart = &config.Restart{Delays: []config.Duration{}}
	fast := named(backendtest.Command(t, "crash-mid-call"), "fast")
	fast.Restart = &config.Restart{Delays: []config.Duration{{Duration: 10 * time.Millisecond}}}
	p := startPool(t, []config.Server{never, fast}, o)
	for _, name := range []string{"never", "fast"} {
		if _, err := p.CallTool(context.Background(), name, "crash", nil); err == nil {
			t.Fatalf("%s: crash returned no error", name)
		}
	}
	testenv.Eventually(t, "fast restarted by its own policy", func() bool {
		st := statusOf(t, p, "fast")
		return st.State == StateUp && st.Restarts == 1
	})
	if st := statusOf(t, p, "never"); st.State != StateDown || st.Restarts != 0 {
		t.Errorf("never (delays []) = %+v, want down without restarts", st)
	}
}

// A lazy server's own idleTimeout overrides Options.IdleTimeout.
func TestPerServerIdleTimeout(t *testing.T) {
	o := lazyOptions(0) // the pool's: keep running
	srv := named(backendtest.Command(t, "normal"), "lazy")
	srv.IdleTimeout = config.Duration{Duration: 100 * time.Millisecond}
	p := startPool(t, []config.Server{srv}, o)
	if _, err := p.CallTool(context.Background(), "lazy", "echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "stopped after its own idle timeout", func() bool { return statusOf(t, p, "lazy").State == StateIdle })
}
