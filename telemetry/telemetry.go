package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpflow/mcpflow/journal"
)

// ShutdownTimeout bounds how long Shutdown waits to export what is left.
const ShutdownTimeout = 5 * time.Second

// Enabled reports whether the environment asks for trace export: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// or OTEL_TRACES_EXPORTER=otlp, and OTEL_SDK_DISABLED not true and
// OTEL_TRACES_EXPORTER not none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch strings.ToLower(getenv("OTEL_TRACES_EXPORTER")) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the global tracer provider and propagators as the
// environment says (see Enabled) and returns the function that flushes
// and shuts them down, bounded by ShutdownTimeout; call it at exit. Off,
// the provider is the no-op one and shutdown does nothing.
func Setup(ctx context.Context) (shutdown func() error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !Enabled(os.Getenv) {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func() error { return nil }, nil
	}
	exp, err := exporter(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", serviceName(os.Getenv))))
	if err != nil {
		res = resource.Default()
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (the SDK reads it).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		return tp.Shutdown(ctx)
	}, nil
}

func serviceName(getenv func(string) string) string {
	if s := getenv("OTEL_SERVICE_NAME"); s != "" {
		return s
	}
	return "mcpflow"
}

// exporter is the OTLP exporter OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (or
// OTEL_EXPORTER_OTLP_PROTOCOL) names: grpc, or http/protobuf (default). The
// exporters read the endpoint, headers, TLS and timeout variables.
func exporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL=%q (use grpc or http/protobuf)", ErrProtocol, proto)
}

// ErrProtocol is returned by Setup for an OTLP protocol it cannot export
// with.
var ErrProtocol = errors.New("unsupported OTLP protocol")

// FromEnv returns ctx carrying the remote span context of the TRACEPARENT
// (and TRACESTATE, BAGGAGE) environment variables, when set: the run's span
// is then a child of the caller's (a CI job's) span.
func FromEnv(ctx context.Context, getenv func(string) string) context.Context {
	c := propagation.MapCarrier{}
	for key, name := range map[string]string{"traceparent": "TRACEPARENT", "tracestate": "TRACESTATE", "baggage": "BAGGAGE"} {
		if v := getenv(name); v != "" {
			c[key] = v
		}
	}
	if len(c) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, c)
}

// commitTracer is the tracer of commit spans.
func commitTracer() trace.Tracer { return otel.Tracer("github.com/mcpflow/mcpflow/journal") }

// OnCommit is the journal.Options.OnCommit that records a commit: its
// latency in the metrics, and a span "mcpflow.journal.commit" when tracing
// is on.
func OnCommit(c journal.Commit) {
	commitLatency.Observe(c.Duration.Seconds())
	if c.Err != nil {
		commitErrors.Inc()
	}
	_, span := commitTracer().Start(context.Background(), "mcpflow.journal.commit", trace.WithTimestamp(c.Start),
		trace.WithAttributes(attribute.Int("mcpflow.journal.writes", c.Writes)))
	if !span.IsRecording() {
		return
	}
	if c.Err != nil {
		span.SetAttributes(attribute.String("error.type", "journal"))
	}
	span.End(trace.WithTimestamp(c.Start.Add(c.Duration)))
}
