package journal

import "testing"

// TestAnswerWaitsForgetWaitersThatStop: a waiter that stops without an
// answer leaves nothing behind; one that stops after its answer does not
// drop a waiter that came after it.
func TestAnswerWaitsForgetWaitersThatStop(t *testing.T) {
	w := &Writer{answers: &answerWaits{}}
	id := NewID()
	_, stop1 := w.AnswerGiven(id)
	_, stop2 := w.AnswerGiven(id)
	stop1()
	stop1() // once
	if n := w.answers.waiting(); n != 1 {
		t.Fatalf("%d invocations waited for after one of two waiters stopped, want 1", n)
	}
	stop2()
	if n := w.answers.waiting(); n != 0 {
		t.Fatalf("%d invocations waited for after every waiter stopped, want 0", n)
	}

	told, stopTold := w.AnswerGiven(id)
	w.answers.answered(id)
	<-told
	next, stopNext := w.AnswerGiven(id)
	stopTold()
	if n := w.answers.waiting(); n != 1 {
		t.Fatalf("a waiter told before stopping dropped the next one (%d waited for)", n)
	}
	w.answers.answered(id)
	<-next
	stopNext()
	if n := w.answers.waiting(); n != 0 {
		t.Fatalf("%d invocations waited for at the end, want 0", n)
	}
}

// waiting is how many invocations have a call waiting.
func (a *answerWaits) waiting() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.by)
}
