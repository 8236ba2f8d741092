package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// agentClient is a go-sdk client that records what the gateway sends it
// besides results.
type agentClient struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	changed  int // notifications/tools/list_changed
}

func (a *agentClient) client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "agent-e2e"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			a.mu.Lock()
			a.progress = append(a.progress, r.Params)
			a.mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			a.mu.Lock()
			a.changed++
			a.mu.Unlock()
		},
	})
}

func (a *agentClient) counts() (progress, changed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.progress), a.changed
}

// TestAgentView drives a real toolgate over the three bundled servers with
// a go-sdk client, over stdio and over streamable HTTP with both protocol
// versions, and checks what an agent sees (issue 13): the description names
// the servers, the top 10 fit in 1,000 tokens, annotations and the
// readOnly filter, detail "full", an error that carries the schema, noMatch
// for a task no tool fits, and progress through the hop. Over stdio, a changed server description
// reaches the client as notifications/tools/list_changed.
func TestAgentView(t *testing.T) {
	cfgPath := bundledConfig(t, nil)
	dataDir := t.TempDir()

	t.Run("stdio", func(t *testing.T) {
		cmd := toolgateCmd(t, dataDir, "serve", "--config", cfgPath)
		cmd.Stderr = testLog(t, "toolgate: ")
		a := &agentClient{}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cs, err := a.client().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect over stdio: %v", err)
		}
		defer cs.Close()
		agentChecks(t, ctx, cs, a)

		// A new description in the config: the gateway applies it without
		// a restart and tells the client its tool list changed.
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["mcpServers"].(map[string]any)["memory"].(map[string]any)["description"] = "remembers people and things for the agent"
		b, _ = json.Marshal(cfg)
		_, before := a.counts()
		if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
			t.Fatal(err)
		}
		// Both at once: a list_changed of something else (a re-index)
		// may come before the reload's.
		testenv.Eventually(t, "notifications/tools/list_changed and the new description after the reload", func() bool {
			_, n := a.counts()
			return n > before && strings.Contains(searchDescription(t, ctx, cs), "memory (9 tools): remembers people and things for the agent")
		})
	})

	t.Run("http", func(t *testing.T) {
		addr := runServeHTTP(t, dataDir, cfgPath)
		var a *agentClient // a new one per protocol version
		eachProtocol(t, addr, 2*time.Minute, func() *mcp.Client { a = &agentClient{}; return a.client() },
			func(t *testing.T, ctx context.Context, cs *mcp.ClientSession) { agentChecks(t, ctx, cs, a) })
	})
}

// searchDescription is search_tools' description in tools/list.
func searchDescription(t *testing.T, ctx context.Context, cs *mcp.ClientSession) string {
	t.Helper()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if tl.Name == gateway.SearchToolName {
			return tl.Description
		}
	}
	t.Fatal("no search_tools in tools/list")
	return ""
}

// foundTools decodes search_tools' structured answer.
func foundTools(t *testing.T, res *mcp.CallToolResult) []gateway.FoundTool {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var out gateway.SearchResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structured answer %s: %v", b, err)
	}
	return out.Tools
}

func agentChecks(t *testing.T, ctx context.Context, cs *mcp.ClientSession, a *agentClient) {
	t.Helper()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: protocol error %v", name, err)
		}
		return res
	}

	// The description names the servers behind the gateway. A cold start
	// slower than coldStartWait (a loaded machine) answers the handshake
	// before its first index is served, with none or only some named yet
	// (those up by then); the client is told its tool list changed once it
	// is.
	servers := []string{"memory (9 tools", "filesystem (14 tools", "everything (13 tools"}
	_, before := a.counts()
	d := searchDescription(t, ctx, cs)
	if slices.ContainsFunc(servers, func(s string) bool { return !strings.Contains(d, s) }) {
		testenv.Eventually(t, "notifications/tools/list_changed once the cold start's index is served", func() bool {
			_, n := a.counts()
			return n > before
		})
		d = searchDescription(t, ctx, cs)
	}
	for _, s := range servers {
		if !strings.Contains(d, s) {
			t.Errorf("search_tools' description does not name %q:\n%s", s, d)
		}
	}

	// The top 10, compact: at most 1,000 tokens by bytes/4.
	res := call(gateway.SearchToolName, map[string]any{"query": "read a file", "limit": 10})
	if txt := resultText(res); res.IsError || len(foundTools(t, res)) != 10 || len(txt)/4 > 1000 {
		t.Errorf("top 10: isError=%v, %d tools, %d bytes (%d tokens by bytes/4, budget 1,000)", res.IsError, len(foundTools(t, res)), len(txt), len(txt)/4)
	}

	// Annotations as the server declared them.
	res = call(gateway.SearchToolName, map[string]any{"query": "read the contents of a text file", "server": "filesystem", "limit": 5})
	var readText *gateway.FoundTool
	for _, ft := range foundTools(t, res) {
		if ft.Name == "filesystem__read_text_file" {
			readText = &ft
		}
	}
	var hints struct{ ReadOnlyHint *bool }
	if readText == nil || json.Unmarshal(readText.Annotations, &hints) != nil || hints.ReadOnlyHint == nil || !*hints.ReadOnlyHint {
		t.Errorf("filesystem__read_text_file: %+v, want annotations.readOnlyHint true", readText)
	} else if !strings.Contains(resultText(res), "filesystem__read_text_file [read-only]") {
		t.Errorf("the text does not mark filesystem__read_text_file read-only:\n%s", resultText(res))
	}

	// readOnly: nothing that writes, edits, moves or creates.
	res = call(gateway.SearchToolName, map[string]any{"query": "write or delete files", "readOnly": true, "limit": 10})
	ro := foundTools(t, res)
	if res.IsError || len(ro) == 0 {
		t.Errorf("readOnly: isError=%v %s", res.IsError, resultText(res))
	}
	for _, ft := range ro {
		for _, w := range []string{"write", "edit", "move", "create", "delete"} {
			if strings.Contains(ft.Name, w) {
				t.Errorf("readOnly returned %s", ft.Name)
			}
		}
	}

	// detail "full" puts the schemas in the text.
	res = call(gateway.SearchToolName, map[string]any{"query": "list the files in a directory", "detail": "full"})
	if txt := resultText(res); res.IsError || !strings.Contains(txt, `"properties"`) {
		t.Errorf(`detail full: no "properties" in the text:\n%s`, txt)
	}

	// A tool's name without its server, as a model drops it, runs the one
	// tool that has it.
	res = call(gateway.ExecuteToolName, map[string]any{"name": "list_allowed_directories"})
	if txt := resultText(res); res.IsError || !strings.Contains(txt, "sandbox") {
		t.Errorf("list_allowed_directories without its server: isError=%v\n%s", res.IsError, txt)
	}

	// Invalid arguments come back with the schema.
	res = call(gateway.ExecuteToolName, map[string]any{"name": "memory__create_entities", "arguments": map[string]any{"entities": "not-a-list"}})
	if txt := resultText(res); !res.IsError || !strings.Contains(txt, "entityType") || !strings.Contains(txt, `"entities" must be an array`) {
		t.Errorf("invalid memory__create_entities: isError=%v\n%s", res.IsError, txt)
	}

	// A task no tool fits is a normal answer that says so.
	res = call(gateway.SearchToolName, map[string]any{"query": "book a flight to Paris"})
	b, _ := json.Marshal(res.StructuredContent)
	var none gateway.SearchResult
	if err := json.Unmarshal(b, &none); err != nil || res.IsError || !none.NoMatch {
		t.Errorf("book a flight to Paris: isError=%v, %s; want noMatch true", res.IsError, b)
	}

	// Progress through the hop: 4 steps over 2 seconds.
	p := &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{
		"name": "everything__trigger-long-running-operation", "arguments": map[string]any{"duration": 2, "steps": 4}}}
	p.SetProgressToken("e2e-progress")
	res, err := cs.CallTool(ctx, p)
	if err != nil || res.IsError {
		t.Fatalf("trigger-long-running-operation: %v %s", err, resultText(res))
	}
	testenv.Eventually(t, "progress notifications at the client", func() bool {
		n, _ := a.counts()
		return n >= 4
	})
	a.mu.Lock()
	tokens := []string{}
	for _, pr := range a.progress {
		tokens = append(tokens, pr.ProgressToken.(string))
	}
	a.mu.Unlock()
	if slices.IndexFunc(tokens, func(s string) bool { return s != "e2e-progress" }) >= 0 {
		t.Errorf("progress tokens %v, want the client's own", tokens)
	}
}
