package engine

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkTracingOff measures, in one process, what the tracing a step
// does costs with tracing off (the no-op provider telemetry.Setup
// installs): the step span, the attempt span, their IsRecording checks and
// the _meta injection, per step. Compare with step-µs of BenchmarkStepCost.
func BenchmarkTracingOff(b *testing.B) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	defer otel.SetTracerProvider(prev)
	ctx := context.Background()
	meta := map[string]any{MetaIdempotencyKey: "k"}
	for b.Loop() {
		sctx, step := tracer().Start(ctx, "mcpflow.step")
		actx, attempt := tracer().Start(sctx, "tools/call t")
		if attempt.IsRecording() || step.IsRecording() {
			b.Fatal("recording with tracing off")
		}
		injectMeta(actx, meta)
		attempt.End()
		step.End()
	}
	if len(meta) != 1 {
		b.Fatalf("_meta %v with tracing off, want only the idempotency key", meta)
	}
}
