package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/telemetry/otlptest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestExportsToCollector: with an endpoint, spans reach an OTLP/HTTP
// collector (in this process) with toolgate's service name and version.
func TestExportsToCollector(t *testing.T) {
	rcv := otlptest.New(t)
	for name, o := range map[string]*telemetry.Options{
		"config": {Endpoint: rcv.URL, Version: "1.2.3"},
		"OTEL_EXPORTER_OTLP_ENDPOINT over config": {Endpoint: "http://127.0.0.1:1", Version: "1.2.3", Getenv: env(map[string]string{telemetry.EnvEndpoint: rcv.URL + "/"})},
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":      {Version: "1.2.3", Getenv: env(map[string]string{telemetry.EnvTracesEndpoint: rcv.URL + "/v1/traces"})},
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := telemetry.Start(context.Background(), o)
			if err != nil || tr == nil {
				t.Fatalf("Start = %v, %v; want tracing on", tr, err)
			}
			if tr.Endpoint != rcv.URL+"/v1/traces" {
				t.Errorf("Endpoint = %q", tr.Endpoint)
			}
			_, span := tr.Provider().Tracer("test").Start(context.Background(), "span-"+name)
			span.End()
			if err := tr.Close(context.Background()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			got := rcv.Named("span-" + name)
			if len(got) != 1 {
				t.Fatalf("collector got %d spans named %q, want 1 (all: %v)", len(got), "span-"+name, rcv.Spans())
			}
			if r := got[0].Resource; r["service.name"] != "toolgate" || r["service.version"] != "1.2.3" {
				t.Errorf("resource %v, want service toolgate 1.2.3", r)
			}
		})
	}
}

func TestOffAndErrors(t *testing.T) {
	for name, o := range map[string]*telemetry.Options{
		"nothing set": nil,
		"disabled":    {Endpoint: "http://127.0.0.1:4318", Getenv: env(map[string]string{telemetry.EnvDisabled: "true"})},
	} {
		if tr, err := telemetry.Start(context.Background(), o); tr != nil || err != nil {
			t.Errorf("%s: Start = %v, %v; want off", name, tr, err)
		}
	}
	var off *telemetry.Tracing
	if off.Provider() != nil || off.Close(context.Background()) != nil {
		t.Error("a nil Tracing must give no provider and close quietly")
	}
	for _, tc := range []struct {
		o    telemetry.Options
		want string
	}{
		{telemetry.Options{Endpoint: "localhost:4318"}, `toolgate.telemetry.otlpEndpoint: "localhost:4318" is not an OTLP/HTTP endpoint`},
		{telemetry.Options{Getenv: env(map[string]string{telemetry.EnvEndpoint: "grpc://x"})}, `OTEL_EXPORTER_OTLP_ENDPOINT: "grpc://x" is not`},
		{telemetry.Options{Getenv: env(map[string]string{telemetry.EnvTracesEndpoint: "x"})}, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "x" is not`},
	} {
		_, err := telemetry.Start(context.Background(), &tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) error = %v, want %q", tc.o, err, tc.want)
		}
	}
}

// An endpoint with a password in it (which OTLP/HTTP does not send: give
// it in OTEL_EXPORTER_OTLP_HEADERS) is logged and reported with the
// password hidden.
func TestEndpointRedacted(t *testing.T) {
	rcv := otlptest.New(t)
	tr, err := telemetry.Start(context.Background(), &telemetry.Options{Endpoint: strings.Replace(rcv.URL, "://", "://user:pw-secret-42@", 1)})
	if err != nil || tr == nil {
		t.Fatalf("Start = %v, %v; want tracing on", tr, err)
	}
	t.Cleanup(func() { tr.Close(context.Background()) })
	if strings.Contains(tr.Endpoint, "pw-secret-42") || !strings.Contains(tr.Endpoint, "user:xxxxx@") {
		t.Errorf("Endpoint = %q, want the password hidden", tr.Endpoint)
	}
}
