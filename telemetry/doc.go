// Package telemetry wires mcpflow to OpenTelemetry traces and Prometheus
// metrics.
//
// Setup reads the standard OTEL_* environment variables and, when they ask
// for it, installs an OTLP trace exporter (gRPC or HTTP/protobuf) as the
// global tracer provider, with the W3C trace-context and baggage
// propagators; otherwise it installs the no-op provider, so the engine's
// spans cost nothing. FromEnv parents a run on an incoming TRACEPARENT.
// The engine, the servers and the journal use the otel global API (and
// journal.Options.OnCommit); they never import this package.
//
// Metrics is the collector behind mcpflow server's /metrics: counts by
// status and state read from the journal at scrape (they survive
// restarts), latencies and replays observed by this process.
//
// # Caveats
//
// Span attributes carry ids, names, states and sizes, never arguments,
// results or inputs. Commit spans are roots of their own traces: a group
// commit carries writes of many runs. Counts from the journal stop at
// CountBound per series (a gauge then reads CountBound).
package telemetry
