package replay_test

import (
	"errors"
	"testing"

	"github.com/mcpflow/mcpflow/internal/failure"
	"github.com/mcpflow/mcpflow/replay"
)

// TestParseClass: every class reads back from its name; nothing else does.
// (internal/failure's TestClassPredicates holds every class against every
// predicate.)
func TestParseClass(t *testing.T) {
	names := map[replay.Class]string{
		replay.ClassNone: "none", replay.ClassToolError: "tool_error", replay.ClassLost: "connection_lost",
		replay.ClassNotDelivered: "not_delivered", replay.ClassAborted: "aborted", replay.ClassTimedOut: "timed_out",
		replay.ClassRejected: "rejected", replay.ClassServerError: "server_error", replay.ClassTooLarge: "result_too_large",
	}
	if len(names) != len(failure.All) {
		t.Fatalf("%d classes named here, %d classes", len(names), len(failure.All))
	}
	for c, name := range names {
		if got := c.String(); got != name {
			t.Errorf("%q.String() = %q, want %q", string(c), got, name)
		}
		if got, err := replay.ParseClass(name); got != c || err != nil {
			t.Errorf("ParseClass(%q) = %v, %v; want %v", name, got, err, c)
		}
	}
	for _, bad := range []string{"", "lost", "Connection_Lost", "crash"} {
		if _, err := replay.ParseClass(bad); !errors.Is(err, replay.ErrUnknownClass) {
			t.Errorf("ParseClass(%q) error %v, want ErrUnknownClass", bad, err)
		}
	}
}
