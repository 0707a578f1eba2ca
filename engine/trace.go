package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/upstream"
)

// Span attributes: ids, names, states and sizes, never arguments, results
// or inputs.
const (
	AttrRunID          = "mcpflow.run.id"
	AttrWorkflow       = "mcpflow.workflow"
	AttrRunStatus      = "mcpflow.run.status"
	AttrResumed        = "mcpflow.run.resumed"
	AttrStep           = "mcpflow.step.id"
	AttrItem           = "mcpflow.step.item"
	AttrServer         = "mcpflow.server"
	AttrInvocationID   = "mcpflow.invocation.id"
	AttrIdempotencyKey = "mcpflow.idempotency_key"
	AttrAttempt        = "mcpflow.attempt"
	AttrAttemptKind    = "mcpflow.attempt.kind" // why it was sent: first, retry, replay, first_delivery, operator_retry
	AttrReplay         = "mcpflow.replay"       // true: a replay (attempt kind replay); false: any other send
	AttrState          = "mcpflow.state"
	AttrFailure        = "mcpflow.failure"
	AttrVerdict        = "mcpflow.verdict"
	AttrReason         = "mcpflow.reason"
	AttrView           = "mcpflow.view"
	AttrArgsBytes      = "mcpflow.arguments.size"
	AttrTransport      = "mcpflow.transport" // stdio, http or sse
)

// networkTransport is the OpenTelemetry MCP conventions' network.transport
// for an mcpflow transport: "pipe" for stdio, "tcp" for HTTP and SSE.
func networkTransport(t string) string {
	if t == upstream.TransportStdio {
		return "pipe"
	}
	return "tcp"
}

// tracer is the engine's tracer, from the global provider: the no-op one
// unless telemetry.Setup installed an exporting one.
func tracer() trace.Tracer { return otel.Tracer("github.com/mcpflow/mcpflow/engine") }

// traceParent is the W3C traceparent of span, or "" when it has none.
func traceParent(span trace.Span) string {
	if !span.SpanContext().IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), span), c)
	return c["traceparent"]
}

// withTraceParent returns ctx with the remote parent a resumed run's
// journaled traceparent names, when ctx carries no span of its own.
func withTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}

// injectMeta adds the span context of ctx (traceparent, tracestate,
// baggage) to a tools/call's _meta as unprefixed keys. Without a valid span
// context (tracing off) it does nothing and allocates nothing.
func injectMeta(ctx context.Context, meta map[string]any) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	c := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, c)
	if _, ok := c["traceparent"]; !ok {
		// No propagator installed: trace context is still sent.
		propagation.TraceContext{}.Inject(ctx, c)
	}
	for k, v := range c {
		meta[k] = v
	}
}

// endRun ends a run's span with the run's status.
func endRun(span trace.Span, run *journal.Run, err error) {
	if span.IsRecording() {
		if run != nil {
			span.SetAttributes(attribute.String(AttrRunID, run.ID.String()), attribute.String(AttrRunStatus, run.Status.String()))
			if run.Status != journal.RunSucceeded && run.Status != journal.RunRunning {
				span.SetStatus(codes.Error, run.Status.String())
			}
		}
		if err != nil {
			span.SetStatus(codes.Error, "journal")
		}
	}
	span.End()
}

// decided reports a journaled replay-rule decision: a span event on the
// attempt's span ("mcpflow.replay" for a replay, "mcpflow.outcome_unknown"
// when the call stops for an operator, "mcpflow.decision" otherwise), and
// the engine's Decided hook.
func (r *runner) decided(ctx context.Context, d *journal.Decision) {
	if d == nil {
		return
	}
	if r.e.Decided != nil {
		r.e.Decided(*d)
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	name := "mcpflow.decision"
	switch {
	case d.Verdict == replay.Replay:
		name = "mcpflow.replay"
	case d.Verdict == replay.OutcomeUnknown:
		name = "mcpflow.outcome_unknown"
	}
	span.AddEvent(name, trace.WithAttributes(attribute.String(AttrVerdict, d.Verdict.String()), attribute.String(AttrReason, d.Reason), attribute.String(AttrView, d.View.String())))
}

// called reports a tools/call attempt to the engine's Called hook.
func (r *runner) called(server, tool string, d time.Duration) {
	if r.e.Called != nil {
		r.e.Called(server, tool, d)
	}
}
