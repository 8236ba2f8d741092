package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fakePool stands in for the backend pool: tests say which servers have
// listed which tools, and it records how it was started and reconfigured.
type fakePool struct {
	mu           sync.Mutex
	servers      []string
	tools        map[string][]*mcp.Tool // listed so far
	started      string                 // "Start" or "StartAsync"
	reconfigured [][]string             // server names of each Reconfigure
	onStart      func()                 // called by Start (the real pool's first listings call ToolsChanged)
	restarted    chan string            // each Restart's server, when not nil
}

var _ Pool = (*fakePool)(nil)

func newFakePool(servers ...string) *fakePool {
	return &fakePool{servers: servers, tools: map[string][]*mcp.Tool{}}
}

// list makes server list tools named names, each described by its name.
func (p *fakePool) list(server string, names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var tools []*mcp.Tool
	for _, n := range names {
		tools = append(tools, &mcp.Tool{Name: n, Description: "tool " + n + " of " + server})
	}
	p.tools[server] = tools
}

func (p *fakePool) Start(context.Context) {
	p.mu.Lock()
	p.started = "Start"
	p.mu.Unlock()
	if p.onStart != nil {
		p.onStart()
	}
}

func (p *fakePool) StartAsync(context.Context) { p.mu.Lock(); p.started = "StartAsync"; p.mu.Unlock() }

func (p *fakePool) Tools() map[string][]*mcp.Tool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]*mcp.Tool{}
	for s, t := range p.tools {
		out[s] = slices.Clone(t)
	}
	return out
}

func (p *fakePool) Servers() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.servers)
}

// Reconfigure diffs by name only (no entry changes) and forgets the tools
// of removed servers, as the pool does.
func (p *fakePool) Restart(server string) error {
	p.mu.Lock()
	known := slices.Contains(p.servers, server)
	p.mu.Unlock()
	if !known {
		return fmt.Errorf("no server %q in the pool", server)
	}
	if p.restarted != nil {
		p.restarted <- server
	}
	return nil
}

func (p *fakePool) ReconfigureWhy(ctx context.Context, servers []config.Server, _ func(string) error) backend.Diff {
	return p.Reconfigure(ctx, servers)
}

func (p *fakePool) Reconfigure(_ context.Context, servers []config.Server) backend.Diff {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d backend.Diff
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
		if slices.Contains(p.servers, s.Name) {
			d.Unchanged = append(d.Unchanged, s.Name)
		} else {
			d.Added = append(d.Added, s.Name)
		}
	}
	for _, s := range p.servers {
		if !slices.Contains(names, s) {
			d.Removed = append(d.Removed, s)
			delete(p.tools, s)
		}
	}
	p.servers = names
	p.reconfigured = append(p.reconfigured, names)
	return d
}

func (p *fakePool) reconfigures() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reconfigured)
}

// fakeEmbedder gives every text the same unit vector; fail makes Embed
// fail, to break a re-index.
type fakeEmbedder struct {
	model string
	fail  atomic.Bool
	texts atomic.Int64 // embedded
}

func (e *fakeEmbedder) ModelID() string { return e.model }
func (e *fakeEmbedder) Dim() int        { return 4 }

func (e *fakeEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if e.fail.Load() {
		return nil, errors.New("embedder broke")
	}
	e.texts.Add(int64(len(texts)))
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 0, 0, 0}
	}
	return out, nil
}

// configBytes is a config file listing servers (none is ever started: the
// pool is fake) plus extra toolgate settings.
func configBytes(t *testing.T, settings map[string]any, servers ...string) []byte {
	t.Helper()
	m := map[string]any{}
	for _, s := range servers {
		m[s] = map[string]any{"command": "fake-" + s}
	}
	doc := map[string]any{"mcpServers": m}
	if settings != nil {
		doc["toolgate"] = settings
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces path's content by a rename, as an editor saving it.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// fixture is a Loop under test over a fake pool, with its config file.
type fixture struct {
	loop *Loop
	pool *fakePool
	path string // the config file
	logs *testenv.LogBuffer
}

// wait waits for cond on the loop's counters (at most testenv.Timeout: a
// failure, not a timing).
func (f *fixture) wait(t *testing.T, what string, cond func(Stats) bool) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	st, err := f.loop.Wait(ctx, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v; stats %+v", what, err, st)
	}
	return st
}
