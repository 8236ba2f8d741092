package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/storage"
)

// Through the real binary and the bundled servers: a search_tools answer
// followed by an execute_tool of one of its tools records a pair in the
// data folder; it survives the gateway's exit, `toolgate learn` shows it,
// the next serve ranks with it, and `toolgate learn --reset` forgets it.
func TestLearningFromUseEndToEnd(t *testing.T) {
	cfgPath := bundledConfig(t, nil)
	dataDir := t.TempDir()
	const query = "store a new entity in the knowledge graph"
	const tool = "memory__create_entities"

	serve := func() (context.Context, *mcp.ClientSession) {
		cmd := toolgateCmd(t, dataDir, "serve", "--config", cfgPath)
		cmd.Stderr = testLog(t, "toolgate: ")
		return connectStdio(t, cmd, 3*time.Minute)
	}
	learnCmd := func(args ...string) string {
		t.Helper()
		cmd := toolgateCmd(t, dataDir, append([]string{"learn"}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("toolgate learn %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}

	ctx, cs := serve()
	searchFinds(t, ctx, cs, query, tool)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{
		"name": tool, "arguments": map[string]any{"entities": []any{map[string]any{"name": "Alice", "entityType": "person", "observations": []any{"works at Acme"}}}},
	}})
	if err != nil || res.IsError {
		t.Fatalf("execute_tool %s: %v %s", tool, err, resultText(res))
	}
	// A tool the search did not return records nothing.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{
		"name": "everything__echo", "arguments": map[string]any{"message": "hi"}}}); err != nil || res.IsError {
		t.Fatalf("execute_tool everything__echo: %v %s", err, resultText(res))
	}
	cs.Close() // serve exits with its client

	if out := learnCmd(); !strings.Contains(out, "1 learned pairs for 1 tools") {
		t.Fatalf("toolgate learn after one search and call: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "learn")); err != nil {
		t.Fatalf("learned pairs not in the data folder: %v", err)
	}

	// The next run reads them (and still answers).
	ctx, cs = serve()
	if ans, _ := searchTools(t, ctx, cs, query, 5); len(ans.Tools) == 0 || ans.Tools[0].Name != tool {
		t.Errorf("after restart, search_tools(%q) = %+v, want %s first", query, ans.Tools, tool)
	}
	cs.Close()

	learnedServer, _, _ := strings.Cut(tool, "__")
	if out := learnCmd("--reset", "--server", "filesystem"); !strings.Contains(out, "forgot 0 learned pairs of server filesystem's tools\nservers with learned pairs: "+learnedServer+"\n") {
		t.Errorf("reset of another server: %q", out)
	}
	if out := learnCmd("--reset"); !strings.Contains(out, "forgot 1 learned pairs") {
		t.Errorf("reset: %q", out)
	}
	if out := learnCmd(); !strings.Contains(out, "0 learned pairs") {
		t.Errorf("after reset: %q", out)
	}
}

// learn --queries seeds pairs from an eval-format log; the flags that do
// not go together are usage errors.
func TestLearnCommand(t *testing.T) {
	g := evalGlobals(t)
	log := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(log, []byte(`{"query": "read my notes", "relevant": ["fs__read_file"]}
{"query": "plan a trip", "relevant": ["m__a", "m__b"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runLearn(context.Background(), g, &learnFlags{queries: log}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "recorded 3 pairs") || !strings.Contains(out.String(), "3 pairs for 3 tools") {
		t.Errorf("output %q", out.String())
	}
	out.Reset()
	if err := runLearn(context.Background(), g, &learnFlags{reset: true, server: "m"}, &out); err != nil || !strings.Contains(out.String(), "forgot 2 learned pairs of server m's tools") {
		t.Errorf("reset m: %v %q", err, out.String())
	}
	for _, f := range []learnFlags{{reset: true, queries: log}, {server: "m"}} {
		var ue usageError
		if err := runLearn(context.Background(), g, &f, &out); err == nil || !errors.As(err, &ue) {
			t.Errorf("%+v: err = %v, want a usage error", f, err)
		}
	}
}

// TestLearnedPairsShortOfMemoryNotDamaged: learned pairs that Badger cannot
// map for want of memory (seen under ulimit -v 2.2 GB) or cannot open for
// want of descriptors are not called damaged, and the fix is the limit,
// not moving the store aside (which would lose what was learned).
func TestLearnedPairsShortOfMemoryNotDamaged(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"During db.vlog.open err: while opening file: /d/learn/000001.vlog err: cannot allocate memory\nwhile mmapping /d/learn/000001.vlog with size: 33554432", "ulimit -v"},
		{"open /d/learn/MANIFEST: too many open files", "open-files limit"},
	} {
		err := damagedError("/d", "/d/learn", errors.New(tc.err))
		fix := storage.Fix("/d", err)
		if strings.Contains(err.Error(), "damaged") || strings.Contains(fix, "mv ") || !strings.Contains(fix, tc.want) {
			t.Errorf("%q: %v, fix %q; want no damage, and the fix to name %q", tc.err, err, fix, tc.want)
		}
	}
	if fix := storage.Fix("/d", damagedError("/d", "/d/learn", errors.New("Value log truncate required"))); !strings.Contains(fix, "mv /d/learn /d/learn.bad") {
		t.Errorf("a damaged store: fix %q, want it moved aside", fix)
	}
}
