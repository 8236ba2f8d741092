package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// index --tools and eval --tools read catalogs through the same reader, so
// a file both must refuse (a server name holding the ID separator) gets
// the same message from both.
func TestIndexAndEvalRefuseTheSameCatalog(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.jsonl")
	queries := filepath.Join(dir, "queries.jsonl")
	os.WriteFile(tools, []byte(`{"server":"ok","name":"a"}`+"\n"+`{"server":"my__srv","name":"b"}`+"\n"), 0o644)
	os.WriteFile(queries, []byte(`{"query":"x","relevant":["ok__a"]}`+"\n"), 0o644)
	g := &globals{dataDir: t.TempDir()}

	ierr := runIndex(context.Background(), g, &indexFlags{tools: tools, noVectors: true}, &bytes.Buffer{}, &bytes.Buffer{})
	eerr := runEval(context.Background(), g, &evalFlags{tools: tools, queries: queries, mode: "bm25"}, &bytes.Buffer{})
	want := tools + `:2: server "my__srv" contains "__", the ID separator`
	for name, err := range map[string]error{"index": ierr, "eval": eerr} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s --tools: error %v, want it to contain %q", name, err, want)
		}
	}
}
