// Package telemetry owns the trace pipeline of `toolgate serve`: whether
// traces are on (off unless an OTLP endpoint is configured), where spans
// go (an OTLP/HTTP collector), and flushing them at exit. The spans
// themselves are started by the gateway and the search engine.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/gateway/config"
)

// The standard OpenTelemetry environment variables read here. The
// exporter and the SDK read the others themselves (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, OTEL_BSP_SCHEDULE_DELAY, ...).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"        // base URL; spans go to its /v1/traces
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // full URL of the traces endpoint
	EnvDisabled       = "OTEL_SDK_DISABLED"                  // "true" turns traces off
)

// tracesPath is where OTLP/HTTP takes spans below a base URL.
const tracesPath = "/v1/traces"

// Options configure Start. Nil means defaults.
type Options struct {
	// Endpoint is toolgate.telemetry.otlpEndpoint: the collector's base
	// URL. The environment beats it, as for every setting.
	Endpoint string
	// Getenv reads the environment (default: none is set; main passes
	// os.Getenv).
	Getenv  func(string) string
	Version string       // service.version of the spans
	Logger  *slog.Logger // export failures; nil = discard
}

// Tracing is a running trace pipeline.
type Tracing struct {
	tp       *sdktrace.TracerProvider
	Endpoint string // where spans go, as decided
}

// Start sets up tracing as the options and the environment say, or returns
// nil (traces off: no endpoint anywhere, or OTEL_SDK_DISABLED=true). A bad
// endpoint is an error naming where it came from.
func Start(ctx context.Context, opts *Options) (*Tracing, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if strings.EqualFold(strings.TrimSpace(o.Getenv(EnvDisabled)), "true") {
		return nil, nil
	}
	var endpoint string
	switch tr, base := o.Getenv(EnvTracesEndpoint), o.Getenv(EnvEndpoint); {
	case tr != "":
		if msg := config.CheckOTLPEndpoint(tr); msg != "" {
			return nil, fmt.Errorf("%s: %q %s", EnvTracesEndpoint, tr, strings.Replace(msg, "(spans go to its /v1/traces)", "(the full URL, e.g. http://localhost:4318/v1/traces)", 1))
		}
		endpoint = tr
	case base != "":
		if msg := config.CheckOTLPEndpoint(base); msg != "" {
			return nil, fmt.Errorf("%s: %q %s", EnvEndpoint, base, msg)
		}
		endpoint = strings.TrimSuffix(base, "/") + tracesPath
	case o.Endpoint != "":
		if msg := config.CheckOTLPEndpoint(o.Endpoint); msg != "" {
			return nil, fmt.Errorf("toolgate.telemetry.otlpEndpoint: %q %s", o.Endpoint, msg)
		}
		endpoint = strings.TrimSuffix(o.Endpoint, "/") + tracesPath
	default:
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("traces to %s: %w", endpoint, err)
	}
	version := o.Version
	if version == "" {
		version = "dev"
	}
	// Later sources win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "toolgate"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// Where spans go, as the log and the caller show it: a password in
	// the URL hidden (OTLP/HTTP does not send it; headers do).
	shown := endpoint
	if u, err := url.Parse(endpoint); err == nil {
		shown = u.Redacted()
	}
	// The exporter reports failures through the global handler: to the log.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("trace export failed", "endpoint", shown, "err", err)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{tp: tp, Endpoint: shown}, nil
}

// Provider is where the gateway starts its spans; nil when t is nil
// (traces off).
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// Close sends the spans not sent yet (bounded by ctx) and stops the
// pipeline. It does nothing when t is nil.
func (t *Tracing) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}
