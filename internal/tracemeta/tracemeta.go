// Package tracemeta owns where a W3C trace context travels in MCP: the
// "traceparent" and "tracestate" keys of a request's _meta. The gateway
// reads it from a client's tools/call (Extract) and writes it into the
// call it makes to a backend (Inject), so that a trace runs from the client
// through toolgate into the backend.
package tracemeta

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The _meta keys of the W3C trace context.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// w3c is the W3C Trace Context propagator (traceparent and tracestate only).
var w3c propagation.TraceContext

// Extract returns ctx carrying the remote span context of meta's
// traceparent (and tracestate) as the parent of the spans started from it.
// Without a valid traceparent ctx comes back as it is, at no cost.
func Extract(ctx context.Context, meta map[string]any) context.Context {
	if _, ok := meta[TraceParent].(string); !ok {
		return ctx
	}
	return w3c.Extract(ctx, carrier(meta))
}

// Inject returns meta with the span context of ctx written into it (a new
// map when meta is nil). Without a valid span context in ctx meta comes
// back as it is, at no cost.
func Inject(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = make(map[string]any, 2)
	}
	w3c.Inject(ctx, carrier(meta))
	return meta
}

// carrier is a _meta map as a propagation.TextMapCarrier.
type carrier map[string]any

var _ propagation.TextMapCarrier = carrier(nil)

func (c carrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c carrier) Set(key, value string) { c[key] = value }

func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
