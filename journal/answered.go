package journal

import "sync"

// answerWaits are the calls of this process waiting for an answer to
// their invocation's input (see [Writer.AnswerGiven]).
type answerWaits struct {
	mu sync.Mutex
	by map[ID]*answerWait
}

type answerWait struct {
	given   chan struct{} // closed at the next answer
	waiters int
}

// AnswerGiven returns a channel closed at the next answer journaled for
// invocation id through this Writer — by this process, whoever gave it —
// and stop, which the caller calls once it no longer waits (after the
// channel closed too). A call waiting for an operator's answer takes it
// at once, not at its next read of the journal; an answer journaled by
// another process (a shared journal) is not told here.
func (w *Writer) AnswerGiven(id ID) (given <-chan struct{}, stop func()) {
	a := w.answers
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.by == nil {
		a.by = map[ID]*answerWait{}
	}
	aw := a.by[id]
	if aw == nil {
		aw = &answerWait{given: make(chan struct{})}
		a.by[id] = aw
	}
	aw.waiters++
	return aw.given, sync.OnceFunc(func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if aw.waiters--; aw.waiters == 0 && a.by[id] == aw {
			delete(a.by, id)
		}
	})
}

// answered tells the waiters of invocation id that an answer was
// journaled.
func (a *answerWaits) answered(id ID) {
	a.mu.Lock()
	aw := a.by[id]
	delete(a.by, id)
	a.mu.Unlock()
	if aw != nil {
		close(aw.given)
	}
}
