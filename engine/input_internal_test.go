package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// countingJournal answers every read of an invocation with one that has
// no answer yet, and counts the reads.
type countingJournal struct {
	Journal
	reads atomic.Int64
}

func (j *countingJournal) Invocation(id journal.ID) (*journal.Invocation, error) {
	j.reads.Add(1)
	return &journal.Invocation{ID: id}, nil
}

// A call that waits for an answer reads the journal less and less often:
// over 2 s, five reads or so (at 0, 0.1, 0.3, 0.7 and 1.5 s), not twenty.
func TestAnswerPollBacksOff(t *testing.T) {
	j := &countingJournal{}
	r := &runner{}
	r.j = scrubbing{Journal: j, r: r}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := r.awaitAnswer(ctx, journal.Intent{ID: journal.NewID(), Attempt: 1}, "q1", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("awaitAnswer: %v, want the deadline", err)
	}
	if n := j.reads.Load(); n < 3 || n > 8 {
		t.Errorf("%d reads of the invocation in 2 s; want about 5", n)
	}
}
