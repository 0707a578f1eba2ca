package httpapi

import (
	"sync"

	"github.com/mcpflow/mcpflow/api"
)

// hub hands every event to the subscribers that want it. A subscriber that
// falls behind by more than its buffer is dropped (its stream ends; a
// client reconnects and reads the run's state from the journal).
type hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]bool
	closed bool
}

type subscriber struct {
	run string // "" for every run
	ch  chan api.Event
}

func (h *hub) init() { h.subs = map[*subscriber]bool{} }

// subscribe returns a subscription to the events of run ("" for all), and
// false when the hub is closed.
func (h *hub) subscribe(run string) (*subscriber, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	s := &subscriber{run: run, ch: make(chan api.Event, 256)}
	h.subs[s] = true
	return s, true
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s] {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *hub) publish(e api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.run != "" && s.run != e.Run {
			continue
		}
		select {
		case s.ch <- e:
		default: // too slow: dropped
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// close ends every subscription.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}
