package backend

import (
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A discover answer after the fallback marks the backend (its next start
// waits for the answer) only when it offers protocol 2026-07-28: go-sdk's
// SSE server answers with the legacy versions alone, and waiting for that
// made each later start wait the full discover delay to end on the legacy
// protocol all the same.
func TestLateDiscoverAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result string
		err    *jsonrpc.Error
		marked bool
	}{
		{"new protocol", `{"supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{}}`, nil, true},
		// go-sdk v1.8.0's SSE server (TestSlowDiscoverRemoteConnects "sse")
		{"legacy versions only", `{"supportedVersions":["2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"capabilities":{}}`, nil, false},
		{"no versions", `{}`, nil, false},
		{"error", "", &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var late atomic.Bool
			c := &probeConn{late: &late, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			resp := &jsonrpc.Response{Result: json.RawMessage(tc.result)}
			if tc.err != nil {
				resp.Error = tc.err // a nil *jsonrpc.Error would be a non-nil error
			}
			c.lateAnswer(resp)
			if late.Load() != tc.marked {
				t.Errorf("marked late = %v, want %v", late.Load(), tc.marked)
			}
		})
	}
}
