package backend

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// TestStructuredNumbersExact: a result's structuredContent with integers
// past 2^53 (a Python server's ints) reaches the caller with every digit,
// over stdio (both protocol generations), streamable HTTP (event streams and
// plain JSON answers) and SSE; go-sdk alone decodes them into float64s.
func TestStructuredNumbersExact(t *testing.T) {
	modes := backendtest.ModeBigNumbers
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) config.Server
	}{
		{"stdio", func(t *testing.T) config.Server { return named(backendtest.Command(t, modes), "b") }},
		{"stdio-legacy", func(t *testing.T) config.Server {
			return named(backendtest.Command(t, modes+","+backendtest.ModeIgnoreDiscover), "b")
		}},
		{"http", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeHTTP, modes).Config("b", nil)
		}},
		{"http-json", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeHTTP, modes+","+backendtest.ModeJSONResponse).Config("b", nil)
		}},
		{"sse", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeSSE, modes).Config("b", nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(nil)
			if tc.name == "stdio-legacy" {
				// It answers the probe's ping and never server/discover:
				// the probe timeout is what its fallback costs.
				o.ProbeTimeout = 300 * time.Millisecond
			}
			p := startPool(t, []config.Server{tc.server(t)}, o)
			for range 2 { // the second call on the same connection too
				res, err := p.CallTool(context.Background(), "b", "big", nil)
				if err != nil || res.IsError {
					t.Fatalf("big: %v %v", err, res)
				}
				b, err := json.Marshal(res.StructuredContent)
				if err != nil || string(b) != backendtest.BigNumbers {
					t.Errorf("structuredContent %s (%v), want %s", b, err, backendtest.BigNumbers)
				}
			}
			// A result without long numbers is go-sdk's, as before.
			res, err := p.CallTool(context.Background(), "b", "add", map[string]any{"a": 1, "b": 2})
			if err != nil || res.IsError {
				t.Fatalf("add: %v %v", err, res)
			}
			if m, ok := res.StructuredContent.(map[string]any); !ok || m["sum"] != 3.0 {
				t.Errorf("add's structuredContent %#v", res.StructuredContent)
			}
		})
	}
}
