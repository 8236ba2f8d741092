package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolgate/toolgate/internal/tracemeta"
)

// Names of the spans execute_tool starts inside its own. search_tools'
// stages (embed, keyword, vector, fuse, and "embed parts" when the whole
// query leaves every hit short of minConfidence) are the search package's.
const (
	spanValidate    = "validate"
	spanBackendCall = "backend_call"
)

// Span attribute keys.
const (
	attrTool          = "toolgate.tool"
	attrServer        = "toolgate.server"
	attrOutcome       = "toolgate.outcome"
	attrSearchMode    = "toolgate.search.mode"
	attrSearchResults = "toolgate.search.results"
)

// traced runs h in a span named after the tool that continues the
// client's trace: the W3C traceparent in the request's _meta. Without a
// tracer it starts no span and costs nothing, but the client's trace
// context still reaches the backend (the pool writes the context's
// traceparent into the call's _meta).
func (g *Gateway) traced(name string, h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = tracemeta.Extract(ctx, req.Params.Meta)
		ctx, span := g.span(ctx, name, trace.SpanKindServer)
		defer span.End()
		res, err := h(ctx, req)
		if !span.IsRecording() {
			return res, err
		}
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case res == nil:
		case res.IsError:
			span.SetStatus(codes.Error, "isError")
		default:
			if out, ok := res.StructuredContent.(SearchResult); ok {
				span.SetAttributes(attribute.String(attrSearchMode, out.Mode), attribute.Int(attrSearchResults, len(out.Tools)))
			}
		}
		return res, err
	}
}

// span starts a child span, or none without a tracer.
func (g *Gateway) span(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, noop.Span{}
	}
	return g.tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// callSpan starts the span of one backend call (the parent of the
// backend's own spans: its context is the traceparent the pool sends).
func (g *Gateway) callSpan(ctx context.Context, server, tool string) (context.Context, trace.Span) {
	ctx, span := g.span(ctx, spanBackendCall, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(attrServer, server), attribute.String(attrTool, tool))
	}
	return ctx, span
}

// endCall records a backend call's outcome on its span and ends it.
func endCall(span trace.Span, outcome Outcome) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String(attrOutcome, string(outcome)))
		if outcome != OutcomeOK {
			span.SetStatus(codes.Error, string(outcome))
		}
	}
	span.End()
}
