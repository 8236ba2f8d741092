package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// benchGlobals point the embedder at the installed model; the bench's own
// work folder is a temp dir.
func benchGlobals(t *testing.T) *globals {
	t.Helper()
	g := &globals{dataDir: t.TempDir(), logger: slog.New(slog.DiscardHandler)}
	g.embedFlags.ModelDir = installedModels()
	if _, c, err := g.openEmbedder(context.Background()); err != nil {
		testenv.Missing(t, "embedder unavailable (make deps): %v", err)
	} else {
		c.Close()
	}
	return g
}

// A tiny bench run prints one table with the rows of the sections asked
// for. It shows the command works end to end (real child processes for
// execute); the figures themselves are never asserted.
func TestBenchSmoke(t *testing.T) {
	g := benchGlobals(t)
	// Children (bench-backend, serve) are this test binary running main().
	t.Setenv("TOOLGATE_E2E_MAIN", "1")
	var out bytes.Buffer
	f := benchFlags{sections: "search,execute,tokens", sizes: "100", queries: 8, calls: 16, embedMax: 50, repeats: 1, workDir: t.TempDir()}
	if err := runBench(context.Background(), g, f, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| search ", "100 tools, hybrid, sequential", "100 tools, bm25, 8 concurrent",
		"gateway stdio, sequential", "gateway streamable HTTP, 16 concurrent", "× direct",
		"synthetic 100: gateway tools/list", "WordPiece",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchUsage(t *testing.T) {
	for _, f := range []benchFlags{
		{sections: "nope", sizes: "100", queries: 8, calls: 16, embedMax: 1, repeats: 1},
		{sections: "tokens", sizes: "ten", queries: 8, calls: 16, embedMax: 1, repeats: 1},
		{sections: "tokens", sizes: "100", queries: 1, calls: 16, embedMax: 1, repeats: 1},
	} {
		var ue usageError
		if err := runBench(context.Background(), &globals{}, f, &bytes.Buffer{}); !errors.As(err, &ue) {
			t.Errorf("%+v: err = %v, want a usage error", f, err)
		}
	}
}

// BenchmarkExecuteHop splits execute_tool's overhead: the same no-op tool
// on a bench-backend child called directly over stdio, and through an
// in-process gateway (client over an in-memory transport, backend pool over
// stdio), so the difference is the gateway's own work without the client's
// process hop. Profile it with -cpuprofile:
//
//	go test ./cmd/toolgate -run '^$' -bench ExecuteHop -benchtime 2000x -cpuprofile /tmp/exec.prof
func BenchmarkExecuteHop(b *testing.B) {
	b.Setenv("TOOLGATE_E2E_MAIN", "1")
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)
	b.Run("direct-stdio", func(b *testing.B) {
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(self, "bench-backend")}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gateway-inprocess", func(b *testing.B) {
		pool := backend.New([]config.Server{{Name: "syn00", Type: "stdio", Command: self, Args: []string{"bench-backend"}}}, nil)
		pool.Start(ctx)
		defer pool.Close()
		ix, err := index.Build(ctx, gateway.Catalog(pool.Tools()), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		eng := search.New(ix, nil, nil)
		defer eng.Close()
		cs, done, err := connectInMemory(ctx, gateway.New(eng, pool, nil).Server())
		if err != nil {
			b.Fatal(err)
		}
		defer done()
		params := &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": "syn00__noop", "arguments": map[string]any{}}}
		for b.Loop() {
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatal(err, resultText(res))
			}
		}
	})
}
