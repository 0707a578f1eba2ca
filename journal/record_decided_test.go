package journal_test

import (
	"testing"

	"github.com/mcpflow/mcpflow/internal/verdict"
	"github.com/mcpflow/mcpflow/journal"
)

// TestDecided: decisions are counted by verdict in one place.
func TestDecided(t *testing.T) {
	inv := &journal.Invocation{Decisions: []journal.Decision{
		{Verdict: verdict.FirstDelivery}, {Verdict: verdict.Retry}, {Verdict: verdict.FirstDelivery}, {Verdict: verdict.Replay},
	}}
	for v, want := range map[verdict.Verdict]int{verdict.FirstDelivery: 2, verdict.Retry: 1, verdict.Replay: 1, verdict.OutcomeUnknown: 0} {
		if got := inv.Decided(v); got != want {
			t.Errorf("Decided(%s) = %d, want %d", v, got, want)
		}
	}
}
