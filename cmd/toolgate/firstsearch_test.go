package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

type stubSearcher struct{ entered, release chan struct{} }

func (s stubSearcher) Search(context.Context, search.Query) (search.Result, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return search.Result{}, nil
}
func (stubSearcher) Tool(string) (catalog.Tool, bool) { return catalog.Tool{}, false }
func (stubSearcher) IDs() []string                    { return nil }

// A warm start's backends wait for the first search's answer (not its
// arrival), for at most the wait given, or until a call needs one.
func TestFirstSearchReleasesBackends(t *testing.T) {
	f := newFirstSearch()
	stub := stubSearcher{entered: make(chan struct{}), release: make(chan struct{})}
	s := f.searcher(stub)
	waited := make(chan struct{})
	go func() {
		f.wait(context.Background(), time.Hour)
		close(waited)
	}()
	answered := make(chan struct{})
	go func() {
		_, _ = s.Search(context.Background(), search.Query{Text: "q"})
		close(answered)
	}()
	<-stub.entered
	select {
	case <-f.done:
		t.Fatal("the backends were released while the first search was still running")
	default:
	}
	close(stub.release)
	<-answered
	<-waited // released by the answer; the hour never passes
	// Later searches and waits do not block on it again.
	_, _ = s.Search(context.Background(), search.Query{Text: "again"})
	f.wait(context.Background(), time.Hour)

	// No search: released after the wait given.
	newFirstSearch().wait(context.Background(), time.Millisecond)
	// A call that needs a backend ends the wait (StartAfter's context).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	newFirstSearch().wait(ctx, time.Hour)
}

// TestColdStartAnswersWhileBuilding: a cold start whose first index takes
// long (here a backend that does not start until the test says so) answers
// the client's handshake anyway, after coldStartWait, and search_tools
// says the index is being built and to try again; once the backend is up
// and the index built, search_tools finds its tools. A client used to get
// no answer to initialize until the index was built (85 s at 10,000
// tools), and may give up after 60 s.
func TestColdStartAnswersWhileBuilding(t *testing.T) {
	fake := backendtest.Command(t, backendtest.ModeNormal)
	gate := filepath.Join(t.TempDir(), "go")
	held := map[string]any{
		"command": "sh",
		"args":    append([]string{"-c", `while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"`, gate, fake.Command}, fake.Args...),
		"env":     fake.Env,
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"fake": held}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", writeConfig(t, string(b)))
	var logs testenv.LogBuffer
	cmd.Stderr = io.MultiWriter(&logs, testLog(t, "toolgate: "))
	ctx, cs := connectStdio(t, cmd, 3*time.Minute) // answered while the backend is held
	search := func() string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo the given text"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			return "error: " + resultText(res)
		}
		return resultText(res)
	}
	if got := search(); !strings.Contains(got, "error: search_tools: the gateway is starting its servers to build the tool index (first start on this data folder); try again in a few seconds.") {
		t.Errorf("search_tools while the backend is held: %q, want that the index is being built", got)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var last string
	testenv.Eventually(t, "search_tools finds the backend's tool once the index is built", func() bool {
		last = search()
		return strings.Contains(last, "fake__echo")
	})
	if !strings.Contains(logs.String(), "cold start: answering the client while the index is built") {
		t.Errorf("the log does not say the index is built while the client is answered:\n%s", logs.String())
	}
}
