package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// TestURLElicitationRequiredRelayed: a backend that cannot run a tool until
// the user opens a page (URLElicitationRequiredError, -32042, protocol
// 2025-11-25: a login to a third party, a payment) gets the client an
// isError whose text has each page's message and URL, which server asks,
// and what to do. It said only the error's message ("URL elicitation
// required"): the URLs, in the error's data, were lost, so the user could
// never do what the tool waited for.
func TestURLElicitationRequiredRelayed(t *testing.T) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "cal", backendtest.ModeURLLogin)}, nil)
	ctx := context.Background()
	for _, pv := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(pv, func(t *testing.T) {
			cs := connectClient(t, rg.g, mcp.NewClient(&mcp.Implementation{Name: "c"}, nil), pv)
			res := executeWith(ctx, t, cs, "cal__login", nil, nil)
			got := text(res)
			if !res.IsError {
				t.Fatalf("cal__login: not an isError: %s", got)
			}
			for _, want := range []string{
				`server "cal" cannot run the tool until the user opens 2 pages`,
				"Log in to your calendar provider.",
				backendtest.LoginElicitations[0].URL,
				backendtest.LoginElicitations[1].URL,
				`Confirm the payment\x1b]0;owned\a.`, // escaped
				"call execute_tool again with the same name and arguments",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("the answer lacks %q:\n%s", want, got)
				}
			}
			if strings.Contains(got, "\x1b") {
				t.Errorf("the answer has the backend's escape sequence as it was:\n%q", got)
			}
		})
	}
}

// TestURLElicitationAsked: a 2026-07-28 backend that asks the user to open a
// page mid-call (a URL-mode elicitation in an input-required result) gets
// the client's answer; the client sees the page's URL and elicitation ID as
// the backend wrote them and a message that names the server. A client of
// 2025-11-25 over stdio is asked by the gateway itself, in URL mode too. A
// client that declared no URL elicitation is not asked: the backend sees
// its capabilities.
func TestURLElicitationAsked(t *testing.T) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "cal", backendtest.ModeURLLogin)}, nil)
	ctx := context.Background()
	page := backendtest.LoginElicitations[0]
	for _, pv := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(pv, func(t *testing.T) {
			var mu sync.Mutex
			var asked []*mcp.ElicitParams
			c := mcp.NewClient(&mcp.Implementation{Name: "c"}, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params)
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			})
			cs := connectClient(t, rg.g, c, pv)
			if isErr, got := executeText(ctx, t, cs, "cal__open_page", nil); isErr || got != "user: accept" {
				t.Fatalf("cal__open_page: isError=%v %q, want the user's accept to reach the backend", isErr, got)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 {
				t.Fatalf("the client was asked %d times, want once", len(asked))
			}
			got := asked[0]
			if got.Mode != "url" || got.URL != page.URL || got.ElicitationID != page.ElicitationID || got.Message != askedOf("cal", page.Message) {
				t.Errorf("the client was asked mode=%q url=%q id=%q message=%q; want %q %q %q %q",
					got.Mode, got.URL, got.ElicitationID, got.Message, "url", page.URL, page.ElicitationID, askedOf("cal", page.Message))
			}
		})
	}
	t.Run("no URL elicitation", func(t *testing.T) {
		cs := connectClient(t, rg.g, (&asker{}).client(), "2026-07-28")
		if _, got := executeText(ctx, t, cs, "cal__open_page", nil); got != backendtest.CannotAsk+"URL elicitation" {
			t.Errorf("a client with form elicitation only: %q, want the backend to see it cannot ask", got)
		}
	})
}
