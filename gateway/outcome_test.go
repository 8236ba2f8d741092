package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
)

func TestCallOutcome(t *testing.T) {
	for _, tc := range []struct {
		res  *mcp.CallToolResult
		err  error
		want Outcome
	}{
		{&mcp.CallToolResult{}, nil, OutcomeOK},
		{&mcp.CallToolResult{IsError: true}, nil, OutcomeError},
		{nil, errors.New("jsonrpc: unknown tool"), OutcomeError},
		{nil, fmt.Errorf("call: %w", backend.ErrCallTimeout), OutcomeTimeout},
		{nil, &backend.UnavailableError{Server: "s", Err: errors.New("down")}, OutcomeUnavailable},
		{nil, &backend.RefusedError{Server: "s", Err: errors.New("insufficient_scope")}, OutcomeError}, // the server stays up: refused, not unavailable
		{nil, fmt.Errorf("scope: %w", ErrDenied), OutcomeDenied},
	} {
		if got := CallOutcome(tc.res, tc.err); got != tc.want {
			t.Errorf("CallOutcome(%v, %v) = %s, want %s", tc.res, tc.err, got, tc.want)
		}
	}
}

// TestDeniedCall: a Caller's refusal (ErrDenied) is an isError result
// with its reason.
func TestDeniedCall(t *testing.T) {
	g, _ := newTestGateway(t, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("the key ci may not run filesystem__list_directory: %w", ErrDenied)
	}})
	res := call(t, connect(t, g), ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "/"}})
	if !res.IsError || !strings.Contains(text(res), "the key ci may not run") {
		t.Errorf("denied call: isError=%v %q", res.IsError, text(res))
	}
}
