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

// TestClassNamesAndPredicates: every failure class against every
// predicate; each class is exactly one of ran, may have run, not run.
func TestClassNamesAndPredicates(t *testing.T) {
	cases := []struct {
		c                    replay.Class
		name                 string
		ran, mayHave, notRun bool
		result               bool
	}{
		{replay.ClassNone, "none", true, false, false, true},
		{replay.ClassToolError, "tool_error", true, false, false, true},
		{replay.ClassLost, "connection_lost", false, true, false, false},
		{replay.ClassNotDelivered, "not_delivered", false, false, true, false},
		{replay.ClassAborted, "aborted", false, true, false, false},
		{replay.ClassTimedOut, "timed_out", false, true, false, false},
		{replay.ClassRejected, "rejected", false, false, true, false},
		{replay.ClassServerError, "server_error", false, true, false, false},
		{replay.ClassTooLarge, "result_too_large", true, false, false, false},
	}
	if len(cases) != len(allClasses) {
		t.Fatalf("%d classes in the table, %d classes", len(cases), len(allClasses))
	}
	for _, tc := range cases {
		if got := tc.c.String(); got != tc.name {
			t.Errorf("Class(%d).String() = %q, want %q", tc.c, got, tc.name)
		}
		if got, err := replay.ParseClass(tc.name); got != tc.c || err != nil {
			t.Errorf("ParseClass(%q) = %v, %v; want %v", tc.name, got, err, tc.c)
		}
		if got := tc.c.Ran(); got != tc.ran {
			t.Errorf("%v.Ran() = %v, want %v", tc.c, got, tc.ran)
		}
		if got := tc.c.MayHaveRun(); got != tc.mayHave {
			t.Errorf("%v.MayHaveRun() = %v, want %v", tc.c, got, tc.mayHave)
		}
		if got := tc.c.NotRun(); got != tc.notRun {
			t.Errorf("%v.NotRun() = %v, want %v", tc.c, got, tc.notRun)
		}
		if got := tc.c.ResultArrived(); got != tc.result {
			t.Errorf("%v.ResultArrived() = %v, want %v", tc.c, got, tc.result)
		}
		n := 0
		for _, p := range []bool{tc.c.Ran(), tc.c.MayHaveRun(), tc.c.NotRun()} {
			if p {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%v is %d of ran, may have run, not run: want exactly one", tc.c, n)
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
