package main

//lint:file-ignore SA1019 roots and sampling are deprecated from protocol 2026-07-28 on (SEP-2577) but stay functional in the deprecation window; execute_tool relays them

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// pyAsker is a go-sdk client that answers questions: it confirms a
// withdrawal unless the title holds "Keep" (then it declines), its model
// answers "a one-line summary of <the prompt>", and its root is
// pyAskerRoot. It counts the questions it was asked.
type pyAsker struct {
	mu    sync.Mutex
	asked int
}

const pyAskerRoot = "file:///library/reading-room-a"

func (a *pyAsker) client() *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "py-asker"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			a.count()
			if strings.Contains(req.Params.Message, "Keep") {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			a.count()
			prompt := ""
			if len(req.Params.Messages) > 0 {
				if t, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt = t.Text
				}
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "a one-line summary of " + prompt}}, nil
		},
	})
	c.AddRoots(&mcp.Root{URI: pyAskerRoot, Name: "reading room A"})
	return c
}

func (a *pyAsker) count() {
	a.mu.Lock()
	a.asked++
	a.mu.Unlock()
}

func (a *pyAsker) questions() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked
}

// TestPythonBackendsAsk: Python SDK 2.x servers (protocol 2026-07-28, over
// stdio and stateless HTTP) whose tools ask the client mid-call (an Elicit
// resolver, accepted and declined; a Sample resolver: input-required
// results) get their answers through `toolgate
// serve` from a go-sdk client at 2026-07-28 over stdio and HTTP, and at
// 2025-11-25 over stdio (the gateway asks it over its session). A
// 2025-11-25 client over HTTP cannot be asked: the backend sees no
// capability and says so. mcp 1.x servers (2025-11-25) are sent no
// capability, as before. A ListRoots resolver's question does not get
// through go-sdk v1.8.0 (see reading_rooms).
func TestPythonBackendsAsk(t *testing.T) {
	py := pythonSDK(t, pythonV2)
	v1 := pythonSDK(t, pythonV1)
	server := pyTestdata(t, "pyserver.py")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"pystdio":     map[string]any{"command": py, "args": []string{server, "stdio"}},
		"pystateless": map[string]any{"type": "http", "url": "http://" + startPyServer(t, py, "stateless-http") + "/mcp"},
		"v1stdio":     map[string]any{"command": v1, "args": []string{server, "stdio"}},
	}})
	cfg := writeConfig(t, string(b))

	// run asks every server's questions of the client of cs; canAsk says
	// whether the gateway can relay them to that client.
	run := func(t *testing.T, ctx context.Context, cs *mcp.ClientSession, a *pyAsker, canAsk bool) {
		for _, srv := range []string{"pystdio", "pystateless", "v1stdio"} {
			id := func(tool string) string { return srv + "__" + tool }
			// The gateway may answer before every backend is up.
			testenv.EventuallyWithin(t, 2*time.Minute, srv+" up", func() bool {
				return !executeTool(t, ctx, cs, id("find_books"), map[string]any{"author": "Le Guin"}).IsError
			})
			for _, c := range []struct {
				tool string
				args map[string]any
				want string
			}{
				{"withdraw_book", map[string]any{"title": "Dune"}, "withdrawn: True"},
				// The prompt's first text says which server asks (relayed
				// sampling requests are attributed, as elicitations are).
				{"summarise_topic", map[string]any{"topic": "sea charts"}, fmt.Sprintf("summary: a one-line summary of server %q asks: Summarise sea charts in one line.", srv)},
				{"reading_rooms", nil, "rooms: " + pyAskerRoot},
			} {
				before := a.questions()
				res := executeTool(t, ctx, cs, id(c.tool), c.args)
				got := resultText(res)
				switch {
				case srv == "v1stdio" && c.tool == "reading_rooms":
					// go-sdk's client answers roots/list over the session
					// whatever it declared: the pool's roots, none.
					if res.IsError || got != "rooms: " || a.questions() != before {
						t.Errorf("%s on %s: isError=%v %q, want the pool's empty roots, the client not asked", c.tool, srv, res.IsError, got)
					}
				case srv == "v1stdio":
					// A 2025-11-25 backend asks over its session, where
					// toolgate declares nothing: mcp 1.x's own refusal.
					if !res.IsError || a.questions() != before {
						t.Errorf("%s on %s: isError=%v %q, want isError (toolgate declares nothing to a 2025-11-25 backend), the client not asked", c.tool, srv, res.IsError, got)
					}
				case c.tool == "reading_rooms" && canAsk:
					// The Python SDK writes a roots/list input request
					// without params (they are optional), which go-sdk
					// v1.8.0 fails to decode (InputRequestMap.UnmarshalJSON
					// unmarshals the absent params): the README says so.
					// When this fails, go-sdk decodes it and the roots come
					// through: update the README and this case.
					// It is the answer that could not be read, not the
					// connection that broke (it used to say "connection
					// lost", after a second's wait for the process to exit).
					if !res.IsError || !strings.Contains(got, "unexpected end of JSON input") || !strings.Contains(got, "could not be read") || strings.Contains(got, "unavailable") || a.questions() != before {
						t.Errorf("%s on %s: isError=%v %q, want go-sdk v1.8.0's decoding error (see the comment)", c.tool, srv, res.IsError, got)
					}
				case !canAsk:
					if !res.IsError || !strings.Contains(got, "Client did not declare the") || a.questions() != before {
						t.Errorf("%s on %s: isError=%v %q, want the backend's refusal for a client it cannot ask, the client not asked", c.tool, srv, res.IsError, got)
					}
				case res.IsError || got != c.want || a.questions() != before+1:
					t.Errorf("%s on %s: isError=%v %q (%d questions), want %q after one question", c.tool, srv, res.IsError, got, a.questions()-before, c.want)
				}
			}
			if srv == "v1stdio" || !canAsk {
				continue
			}
			// Declined: the resolver's consumer wanted the model, so the
			// call ends in the backend's isError.
			res := executeTool(t, ctx, cs, id("withdraw_book"), map[string]any{"title": "Keep Me"})
			if got := resultText(res); !res.IsError || !strings.Contains(got, "elicitation was decline") {
				t.Errorf("withdraw_book declined on %s: isError=%v %q, want the backend's isError for a declined elicitation", srv, res.IsError, got)
			}
		}
	}

	for _, pv := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("stdio "+pv, func(t *testing.T) {
			cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25")
			cmd.Stderr = testLog(t, "toolgate: ")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			a := &pyAsker{}
			cs, err := a.client().Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
			if err != nil {
				t.Fatalf("connect to toolgate serve over stdio: %v", err)
			}
			defer cs.Close()
			run(t, ctx, cs, a, true)
		})
	}
	t.Run("http", func(t *testing.T) {
		addr := freeAddr(t)
		cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25", "--http", addr)
		cmd.Stderr = testLog(t, "toolgate: ")
		startHTTP(t, cmd, addr, 3*time.Minute)
		for _, pv := range []string{"2026-07-28", "2025-11-25"} {
			t.Run(pv, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				a := &pyAsker{}
				cs, err := a.client().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
				if err != nil {
					t.Fatalf("connect to toolgate serve over HTTP: %v", err)
				}
				defer cs.Close()
				run(t, ctx, cs, a, pv >= "2026-07-28")
			})
		}
	})
}
