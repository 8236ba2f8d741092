package gateway

import (
	"context"
	"strings"
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
