package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/models"
)

// benchGlobals point the embedder at the installed model; the bench's own
// work folder is a temp dir.
func benchGlobals(t *testing.T) *globals {
	t.Helper()
	g := &globals{dataDir: t.TempDir(), logger: slog.New(slog.DiscardHandler)}
	g.embed().modelDir = models.Dir("")
	if _, c, err := g.openEmbedder(context.Background()); err != nil {
		requireOrSkip(t, "embedder unavailable: %v", err)
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
