package replay_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/replay"
)

func TestErrOutcomeUnknown(t *testing.T) {
	err := replay.ErrOutcomeUnknown
	if want := replay.Code + ": " + replay.Message; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if replay.Code != "MCPFLOW_OUTCOME_UNKNOWN" || !strings.HasPrefix(err.Error(), "MCPFLOW_OUTCOME_UNKNOWN: ") {
		t.Errorf("Error() = %q does not start with the code", err)
	}
	for _, part := range []string{"may have completed", "must not be retried automatically", "mcpflow journal resolve"} {
		if !strings.Contains(replay.Message, part) {
			t.Errorf("Message %q lacks %q", replay.Message, part)
		}
	}
	wrapped := fmt.Errorf("invocation %s: %w", "inv-1", err)
	if !errors.Is(wrapped, replay.ErrOutcomeUnknown) {
		t.Error("errors.Is(wrapped, ErrOutcomeUnknown) = false")
	}
	if errors.Is(errors.New(err.Error()), replay.ErrOutcomeUnknown) {
		t.Error("an error with the same text matched ErrOutcomeUnknown")
	}
}
