package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

func execute(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": name, "arguments": args}})
	if err != nil {
		t.Fatalf("execute_tool %s: protocol error %v (backend failures must be isError results)", name, err)
	}
	return res
}

// Killing a backend's process in the middle of a call gives the client an
// isError result that says the server is unavailable (not a hang until the
// call deadline, not a protocol error), and the backend serves again after
// the first restart delay.
// With a reaper (Options.Reaper) the process killed is the backend's reaper,
// which takes the backend with it.
func TestBackendKilledMidCall(t *testing.T) {
	for _, reaper := range []bool{false, true} {
		t.Run(fmt.Sprintf("reaper=%v", reaper), func(t *testing.T) { testBackendKilledMidCall(t, reaper) })
	}
}

func testBackendKilledMidCall(t *testing.T, reaper bool) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "victim", "normal"), fakeServer(t, "other", "normal")},
		&backend.Options{RestartDelays: []time.Duration{200 * time.Millisecond}, Reaper: reaper})
	cs := connect(t, rg.g)
	pid := rg.status(t, "victim").PID

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		// The call would take a minute; the context bounds the test, not the claim.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res := execute(ctx, t, cs, "victim__sleep", map[string]any{"ms": 60000})
		done <- res
	}()
	testenv.Eventually(t, "the call in flight on victim", func() bool { return rg.status(t, "victim").InFlight == 1 })
	killedAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	t.Logf("isError result %s after SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	if !res.IsError || !strings.Contains(text(res), `server "victim" is unavailable`) || !strings.Contains(text(res), "signal: killed") ||
		!strings.Contains(text(res), " during the call: "+backend.ErrMayHaveRun.Error()) {
		t.Fatalf("result after SIGKILL = %q (isError %v), want an isError result saying the server is unavailable because its process was killed, and that the call may have run", text(res), res.IsError)
	}
	// The other backend never noticed.
	if res := execute(context.Background(), t, cs, "other__echo", map[string]any{"text": "still here"}); res.IsError || text(res) != "still here" {
		t.Errorf("other backend after the kill: %q", text(res))
	}
	testenv.Eventually(t, "victim restarted after the first backoff", func() bool {
		st := rg.status(t, "victim")
		return st.State == backend.StateUp && st.PID != pid && st.PID != 0
	})
	if st := rg.status(t, "victim"); st.Restarts != 1 || !strings.Contains(st.LastErr, "signal: killed") {
		t.Errorf("victim status after restart: %+v", st)
	}
	if res := execute(context.Background(), t, cs, "victim__echo", map[string]any{"text": "back"}); res.IsError || text(res) != "back" {
		t.Errorf("victim after restart: %q (isError %v)", text(res), res.IsError)
	}
}

// A hung backend is cut at its call deadline with an isError result and a
// notifications/cancelled, while the other backends keep answering during
// the hang.
func TestHungBackendCutAtDeadline(t *testing.T) {
	hung := fakeServer(t, "hung", "hang")
	hung.CallTimeout = config.Duration{Duration: 2 * time.Second}
	rg := newRealGateway(t, []config.Server{hung, fakeServer(t, "a", "normal"), fakeServer(t, "b", "normal")}, nil)
	cs := connect(t, rg.g)

	hangDone := make(chan *mcp.CallToolResult, 1)
	go func() { hangDone <- execute(context.Background(), t, cs, "hung__hang", nil) }()

	// While the hang is pending, the others answer (in parallel, several rounds).
	answered := 0
	for round := 0; ; round++ {
		var wg sync.WaitGroup
		results := make([]*mcp.CallToolResult, 2)
		for i, name := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = execute(context.Background(), t, cs, name+"__echo", map[string]any{"text": name})
			}()
		}
		wg.Wait()
		for i, name := range []string{"a", "b"} {
			if results[i].IsError || text(results[i]) != name {
				t.Fatalf("round %d: %s answered %q while hung hangs", round, name, text(results[i]))
			}
		}
		select {
		case res := <-hangDone:
			if answered == 0 {
				t.Fatalf("the hang ended before any other call was made: %q", text(res))
			}
			t.Logf("%d calls answered by the other backends during the hang", answered)
			if !res.IsError || !strings.Contains(text(res), "timed out") || !strings.Contains(text(res), "2s") {
				t.Fatalf("hung call result = %q (isError %v), want an isError result saying it timed out after 2s", text(res), res.IsError)
			}
			testenv.Eventually(t, "the backend was sent notifications/cancelled", func() bool {
				res, err := rg.pool.CallTool(context.Background(), "hung", "hangs", nil)
				return err == nil && text(res) == backendtest.HangCount(0, 1)
			})
			if st := rg.status(t, "hung"); st.State != backend.StateUp || st.Restarts != 0 {
				t.Errorf("a timed-out call must not take the backend down: %+v", st)
			}
			return
		default:
			answered += 2
		}
	}
}
