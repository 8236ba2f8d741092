package mgmt

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// startsSlowly is a Caller (the management server in front of the pool,
// as serve caps it) whose restarts of the servers named slow* wait until
// released, as toolgate__restart_server waits for a server slow to start;
// its other calls answer at once.
type startsSlowly struct {
	release chan struct{}
	mu      sync.Mutex
	waiting int
}

func (s *startsSlowly) CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	if name, _ := args["name"].(string); strings.HasPrefix(name, "slow") {
		s.mu.Lock()
		s.waiting++
		s.mu.Unlock()
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &mcp.CallToolResult{}, nil
}

func (s *startsSlowly) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// At limits.maxInFlight 2, two restarts waiting for servers slow to start
// hold up neither the operator's next restart of another server nor the
// other management calls: each restart waits on slots of its own
// server's management calls (Gate). They all waited on the built-in
// server's two, and were refused as busy after the queue timeout. Calls
// on one server stay capped: a third restart of the same server is busy.
func TestRestartsWaitOnTheirServersSlots(t *testing.T) {
	next := &startsSlowly{release: make(chan struct{})}
	capped := limit.NewInFlight(next, &limit.Options{MaxInFlight: 2, QueueTimeout: 50 * time.Millisecond, Gate: Gate})
	ctx := context.Background()
	restart := func(server string) error {
		_, err := capped.CallTool(ctx, Name, "restart_server", map[string]any{"name": server})
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(next.release)
	for _, server := range []string{"slow1", "slow2", "slow1"} {
		wg.Go(func() {
			if err := restart(server); err != nil {
				t.Errorf("restart %s: %v", server, err)
			}
		})
	}
	testenv.Eventually(t, "three restarts waiting for their servers' start", func() bool { return next.count() == 3 })
	if err := restart("github"); err != nil {
		t.Errorf("a restart of another server while three wait: %v", err)
	}
	if _, err := capped.CallTool(ctx, Name, "list_servers", nil); err != nil {
		t.Errorf("list_servers while three restarts wait: %v", err)
	}
	if err := restart("slow1"); !errors.Is(err, limit.ErrBusy) || !strings.Contains(err.Error(), "running on it for slow1") {
		t.Errorf("a third restart of slow1 while two of it wait: %v, want ErrBusy naming slow1", err)
	}
}
