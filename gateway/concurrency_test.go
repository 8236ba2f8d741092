package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// fakeServer is a fake backend process (backendtest) named name.
func fakeServer(t *testing.T, name, modes string, extraEnv ...string) config.Server {
	s := backendtest.Command(t, modes, extraEnv...)
	s.Name = name
	return s
}

// realGateway is a Gateway over a started backend.Pool of real fake-backend
// processes, with a BM25 search engine over the pool's catalog.
type realGateway struct {
	g    *Gateway
	pool *backend.Pool
}

func newRealGateway(t *testing.T, servers []config.Server, opts *backend.Options) *realGateway {
	t.Helper()
	return newRealGatewayWith(t, servers, opts, nil)
}

// newRealGatewayWith is newRealGateway with the gateway's options gopts
// (its Logger is the test's).
func newRealGatewayWith(t *testing.T, servers []config.Server, opts *backend.Options, gopts *Options) *realGateway {
	t.Helper()
	logs := &testenv.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway and backend logs:\n%s", logs)
		}
	})
	var o backend.Options
	if opts != nil {
		o = *opts
	}
	o.Logger = log
	pool := backend.New(servers, &o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool.Start(ctx)
	t.Cleanup(func() { pool.Close() })
	for _, st := range pool.Status() {
		if st.State != backend.StateUp {
			t.Fatalf("backend %s is %s: %s", st.Name, st.State, st.Err)
		}
	}
	ix, err := index.Build(ctx, backend.Catalog(pool.Tools()), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, &search.Options{Logger: log})
	t.Cleanup(func() { eng.Close() })
	var gopt Options
	if gopts != nil {
		gopt = *gopts
	}
	gopt.Logger = log
	return &realGateway{g: New(eng, pool, &gopt), pool: pool}
}

func (rg *realGateway) status(t *testing.T, name string) backend.Status {
	t.Helper()
	for _, st := range rg.pool.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no backend %q", name)
	return backend.Status{}
}

// TestConcurrentSessions runs 64 client sessions × 200 execute_tool calls
// over 3 real backend processes: half the sessions over streamable HTTP, half
// in memory, each session with 4 calls in flight at a time and every call
// with its own payload. Every answer must reach the session and call that
// asked for it; none may be lost.
func TestConcurrentSessions(t *testing.T) {
	const (
		sessions = 64
		calls    = 200 // per session
		inFlight = 4   // concurrent calls per session
	)
	// The cost per call is mostly JSON and garbage collection under the race
	// detector, in this process and in the backends: collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	names := []string{"alpha", "beta", "gamma"}
	var servers []config.Server
	for _, n := range names {
		servers = append(servers, fakeServer(t, n, "normal", "GOGC=800"))
	}
	rg := newRealGateway(t, servers, nil)
	hs := httptest.NewServer(rg.g.HTTPHandler(nil))
	t.Cleanup(hs.Close)

	ctx := context.Background()
	var ok, wrong, failed atomic.Int64
	perServer := make([]atomic.Int64, len(names))
	var errMu sync.Mutex
	var firstErrs []string
	report := func(format string, args ...any) {
		errMu.Lock()
		defer errMu.Unlock()
		if len(firstErrs) < 10 {
			firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
		}
	}

	start := time.Now()
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("client-%02d", s)}, nil)
			var cs *mcp.ClientSession
			var err error
			if s%2 == 0 {
				cs, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", MaxRetries: -1}, nil)
			} else {
				ct, st := mcp.NewInMemoryTransports()
				var ss *mcp.ServerSession
				if ss, err = rg.g.Server().Connect(ctx, st, nil); err == nil {
					defer ss.Wait()
					cs, err = client.Connect(ctx, ct, nil)
				}
			}
			if err != nil {
				failed.Add(calls)
				report("session %d: connect: %v", s, err)
				return
			}
			defer cs.Close()
			var sw sync.WaitGroup
			for w := range inFlight {
				sw.Add(1)
				go func() {
					defer sw.Done()
					for c := w; c < calls; c += inFlight {
						srv := (s + c) % len(names)
						payload := fmt.Sprintf("session %02d call %03d via %s: %x", s, c, names[srv], s*calls+c)
						res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{
							"name":      names[srv] + "__echo",
							"arguments": map[string]any{"text": payload},
						}})
						switch {
						case err != nil:
							failed.Add(1)
							report("session %d call %d: protocol error %v", s, c, err)
						case res.IsError:
							failed.Add(1)
							report("session %d call %d: isError %s", s, c, text(res))
						case text(res) != payload:
							wrong.Add(1)
							report("session %d call %d: got %q, want %q", s, c, text(res), payload)
						default:
							ok.Add(1)
							perServer[srv].Add(1)
						}
					}
				}()
			}
			sw.Wait()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d sessions × %d calls in %s (%.0f calls/s); per backend %d/%d/%d",
		sessions, calls, elapsed.Round(time.Millisecond), float64(sessions*calls)/elapsed.Seconds(),
		perServer[0].Load(), perServer[1].Load(), perServer[2].Load())
	if ok.Load() != sessions*calls || wrong.Load() != 0 || failed.Load() != 0 {
		t.Errorf("ok %d, wrong answer %d, failed %d of %d calls; first problems:\n  %s",
			ok.Load(), wrong.Load(), failed.Load(), sessions*calls, strings.Join(firstErrs, "\n  "))
	}
	for _, st := range rg.pool.Status() {
		if st.State != backend.StateUp || st.Restarts != 0 {
			t.Errorf("backend %s after the run: %+v", st.Name, st)
		}
	}
}
