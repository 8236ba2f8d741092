package search

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The stages of a search, each a span when tracing is on: the query's
// embedding, the keyword (BM25) search, the vector scan, the fusion (exact
// scores of the candidates one signal lacks, then the ranking), the
// embedding of the query's parts (parts.go: for a query of several steps,
// beside the whole query's; otherwise only when the whole query leaves
// every hit short of the confidence threshold) and the ranking of each part
// (steps.go).
const (
	stageEmbed   = "embed"
	stageKeyword = "keyword"
	stageVector  = "vector"
	stageFuse    = "fuse"
	stageParts   = "embed parts"
	stageSteps   = "rank parts"
)

// stages starts the spans of a search's stages under the caller's span,
// with the caller's tracer provider, so the engine needs no tracing
// options. When the caller's span does not record (tracing off, the usual
// case) it starts nothing and allocates nothing.
type stages struct{ tracer trace.Tracer }

func stagesOf(ctx context.Context) stages {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return stages{}
	}
	return stages{span.TracerProvider().Tracer("github.com/toolgate/toolgate/search")}
}

func (s stages) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, noop.Span{}
	}
	return s.tracer.Start(ctx, name)
}
