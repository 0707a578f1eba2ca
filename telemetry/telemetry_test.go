package telemetry_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpflow/mcpflow/telemetry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestEnabled: export is on only when an OTLP endpoint or exporter is
// asked for, and never when the SDK is disabled.
func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://localhost:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := telemetry.Enabled(env(tc.env)); got != tc.want {
			t.Errorf("Enabled(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestSetupRefusesAnUnknownProtocol: a protocol the exporters do not speak
// is an error naming it.
func TestSetupRefusesAnUnknownProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, err := telemetry.Setup(context.Background()); !errors.Is(err, telemetry.ErrProtocol) {
		t.Errorf("Setup with http/json: %v, want ErrProtocol", err)
	}
}

// TestFromEnv: TRACEPARENT becomes the remote parent; without it the
// context is unchanged.
func TestFromEnv(t *testing.T) {
	if _, err := telemetry.Setup(context.Background()); err != nil { // off: propagators only
		t.Fatal(err)
	}
	ctx := telemetry.FromEnv(context.Background(), env(map[string]string{"TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("span context %+v", sc)
	}
	if sc := trace.SpanContextFromContext(telemetry.FromEnv(context.Background(), env(nil))); sc.IsValid() {
		t.Errorf("without TRACEPARENT: %+v", sc)
	}
}
