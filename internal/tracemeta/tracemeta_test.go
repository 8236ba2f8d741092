package tracemeta

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestRoundTrip(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := Extract(context.Background(), map[string]any{TraceParent: parent, TraceState: "vendor=x", "other": 1})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsSampled() {
		t.Fatalf("extracted %+v", sc)
	}
	meta := Inject(ctx, map[string]any{"progressToken": "p"})
	if meta[TraceParent] != parent || meta[TraceState] != "vendor=x" || meta["progressToken"] != "p" {
		t.Errorf("injected %v", meta)
	}
}

func TestNothingToCarry(t *testing.T) {
	ctx := context.Background()
	for _, meta := range []map[string]any{nil, {}, {TraceParent: 42}, {TraceParent: "garbage"}} {
		if sc := trace.SpanContextFromContext(Extract(ctx, meta)); sc.IsValid() {
			t.Errorf("Extract(%v) = %+v, want no span context", meta, sc)
		}
	}
	if m := Inject(ctx, nil); m != nil {
		t.Errorf("Inject without a span context = %v, want nil", m)
	}
	if n := testing.AllocsPerRun(100, func() { Inject(Extract(ctx, nil), nil) }); n != 0 {
		t.Errorf("%v allocations without a trace context, want 0", n)
	}
}
