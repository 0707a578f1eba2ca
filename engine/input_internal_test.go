package engine

import (
	"context"
	"encoding/json"
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

// tellingJournal is a countingJournal that tells a waiting call when the
// test answers, as journal.Writer does: the reads find the answer from
// then on.
type tellingJournal struct {
	countingJournal
	firstRead chan struct{} // closed once the first read found no answer
	given     chan struct{}
	answer    atomic.Pointer[json.RawMessage]
}

func (j *tellingJournal) AnswerGiven(journal.ID) (<-chan struct{}, func()) {
	return j.given, func() {}
}

func (j *tellingJournal) Invocation(id journal.ID) (*journal.Invocation, error) {
	inv := &journal.Invocation{ID: id}
	if a := j.answer.Load(); a != nil {
		inv.Inputs = []journal.Input{{Attempt: 1, Answers: []journal.Answer{{Key: "q1", Response: *a}}}}
	}
	if j.reads.Add(1) == 1 {
		close(j.firstRead)
	}
	return inv, nil
}

// TestAnswerGivenWakesTheCall: a call waiting for an answer takes one
// journaled in this process as soon as the journal tells it, not at its
// next read (here an hour away).
func TestAnswerGivenWakesTheCall(t *testing.T) {
	j := &tellingJournal{firstRead: make(chan struct{}), given: make(chan struct{})}
	r := &runner{answerPoll: time.Hour}
	r.j = scrubbing{Journal: j, r: r}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan json.RawMessage, 1)
	go func() {
		resp, err := r.awaitAnswer(ctx, journal.Intent{ID: journal.NewID(), Attempt: 1}, "q1", nil)
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		got <- resp
	}()
	select {
	case <-j.firstRead:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never read the journal")
	}
	answer := json.RawMessage(`{"action":"accept"}`)
	j.answer.Store(&answer)
	close(j.given)
	select {
	case resp := <-got:
		if string(resp) != string(answer) {
			t.Errorf("awaitAnswer = %s, want %s", resp, answer)
		}
	case <-time.After(30 * time.Second):
		cancel()
		<-got
		t.Fatal("the call, told of its answer, still waited after 30 s")
	}
	if n := j.reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2: before the answer, and once told", n)
	}
}
