package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolgate/toolgate/internal/tracemeta"
)

const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan   = "00f067aa0ba902b7"
	clientParent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// TestTraces: with a tracer provider, search_tools and execute_tool are
// spans that continue the client's traceparent (from _meta); execute_tool
// has validate and backend_call children, and the backend is called with
// the backend_call span's context (which the pool writes into _meta).
func TestTraces(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	var sent map[string]any // the _meta the backend call would carry
	caller := &fakeCaller{}
	g, _ := newTestGateway(t, caller)
	g = New(g.searcher, g.caller, &Options{TracerProvider: tp})
	caller.call = func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: tool == "add"}, nil
	}
	// fakeCaller drops the context: wrap it to see what the pool would send.
	g.caller = callerCtx(func(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		sent = tracemeta.Inject(ctx, nil)
		return caller.CallTool(ctx, server, tool, args)
	})
	cs := connect(t, g)
	meta := mcp.Meta{tracemeta.TraceParent: clientParent}
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: SearchToolName, Arguments: map[string]any{"query": "files"}}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: ExecuteToolName,
		Arguments: map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "/"}}})
	if err != nil || res.IsError {
		t.Fatalf("execute_tool: %v %s", err, text(res))
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		spans[s.Name()] = s
	}
	var names []string
	for n := range spans {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"backend_call", "execute_tool", "search_tools", "validate"}; !slices.Equal(names, want) {
		t.Fatalf("spans %v, want %v", names, want)
	}
	for _, n := range []string{"search_tools", "execute_tool"} {
		s := spans[n]
		if s.SpanContext().TraceID().String() != clientTrace || s.Parent().SpanID().String() != clientSpan || !s.Parent().IsRemote() {
			t.Errorf("%s: trace %s parent %s, want the client's trace %s and span %s", n, s.SpanContext().TraceID(), s.Parent().SpanID(), clientTrace, clientSpan)
		}
	}
	exec, call := spans["execute_tool"], spans["backend_call"]
	for _, n := range []string{"validate", "backend_call"} {
		if spans[n].Parent().SpanID() != exec.SpanContext().SpanID() {
			t.Errorf("%s is not a child of execute_tool", n)
		}
	}
	want := fmt.Sprintf("00-%s-%s-01", clientTrace, call.SpanContext().SpanID())
	if sent[tracemeta.TraceParent] != want {
		t.Errorf("backend call carries traceparent %v, want %s (the backend_call span)", sent[tracemeta.TraceParent], want)
	}
	attrs := map[string]string{}
	for _, a := range call.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["toolgate.server"] != "filesystem" || attrs["toolgate.tool"] != "list_directory" || attrs["toolgate.outcome"] != "ok" {
		t.Errorf("backend_call attributes %v", attrs)
	}

	// A tool's isError marks its span and the backend call's as errors.
	exp.Reset()
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: ExecuteToolName,
		Arguments: map[string]any{"name": "everything__add", "arguments": map[string]any{"a": 1, "b": 2}}})
	if !res.IsError {
		t.Fatal("everything__add: want the backend's isError")
	}
	for _, s := range exp.GetSpans().Snapshots() {
		if (s.Name() == "execute_tool" || s.Name() == "backend_call") && s.Status().Code != codes.Error {
			t.Errorf("%s: status %v, want Error", s.Name(), s.Status())
		}
		if s.Parent().IsValid() && s.Name() == "execute_tool" {
			t.Errorf("execute_tool without a traceparent has parent %v, want a new trace", s.Parent())
		}
	}
}

// TestTraceContextPassesThroughWithoutTracing: with tracing off the
// client's traceparent still reaches the backend unchanged.
func TestTraceContextPassesThroughWithoutTracing(t *testing.T) {
	var sent map[string]any
	g, _ := newTestGateway(t, nil)
	g.caller = callerCtx(func(ctx context.Context, _, _ string, _ map[string]any) (*mcp.CallToolResult, error) {
		sent = tracemeta.Inject(ctx, nil)
		return &mcp.CallToolResult{}, nil
	})
	cs := connect(t, g)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: mcp.Meta{tracemeta.TraceParent: clientParent}, Name: ExecuteToolName,
		Arguments: map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "/"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := sent[tracemeta.TraceParent].(string); !strings.EqualFold(got, clientParent) {
		t.Errorf("backend call carries traceparent %q, want the client's %q", got, clientParent)
	}
}

type callerCtx func(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error)

func (f callerCtx) CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return f(ctx, server, tool, args)
}
