package replay_test

import (
	"errors"
	"testing"

	"github.com/mcpflow/mcpflow/replay"
)

var allClasses = []replay.Class{
	replay.ClassNone, replay.ClassToolError, replay.ClassLost, replay.ClassNotDelivered,
	replay.ClassAborted, replay.ClassTimedOut, replay.ClassRejected, replay.ClassServerError,
	replay.ClassTooLarge,
}

func TestClassNamesAndPredicates(t *testing.T) {
	for _, tc := range []struct {
		c        replay.Class
		name     string
		mayHave  bool
		executed bool
	}{
		{replay.ClassNone, "none", false, true},
		{replay.ClassToolError, "tool_error", false, true},
		{replay.ClassLost, "connection_lost", true, false},
		{replay.ClassNotDelivered, "not_delivered", false, false},
		{replay.ClassAborted, "aborted", true, false},
		{replay.ClassTimedOut, "timed_out", true, false},
		{replay.ClassRejected, "rejected", false, false},
		{replay.ClassServerError, "server_error", true, false},
		{replay.ClassTooLarge, "result_too_large", false, false},
	} {
		if got := tc.c.String(); got != tc.name {
			t.Errorf("Class(%d).String() = %q, want %q", tc.c, got, tc.name)
		}
		if got, err := replay.ParseClass(tc.name); got != tc.c || err != nil {
			t.Errorf("ParseClass(%q) = %v, %v; want %v", tc.name, got, err, tc.c)
		}
		if got := tc.c.MayHaveExecuted(); got != tc.mayHave {
			t.Errorf("%v.MayHaveExecuted() = %v, want %v", tc.c, got, tc.mayHave)
		}
		if got := tc.c.Executed(); got != tc.executed {
			t.Errorf("%v.Executed() = %v, want %v", tc.c, got, tc.executed)
		}
	}
	if got := replay.Class(42).String(); got != "Class(42)" {
		t.Errorf("Class(42).String() = %q", got)
	}
	for _, bad := range []string{"", "lost", "Connection_Lost", "Class(42)"} {
		if _, err := replay.ParseClass(bad); !errors.Is(err, replay.ErrUnknownClass) {
			t.Errorf("ParseClass(%q) error %v, want ErrUnknownClass", bad, err)
		}
	}
}
