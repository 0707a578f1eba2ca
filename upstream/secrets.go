package upstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Redacted stands in for a secret in a server's log. It is the text
// workflow.Redacted shows everywhere else (this package cannot import
// workflow; a test pins the two together).
const Redacted = "[redacted]"

// HoldSecrets adds values to the secrets the session scrubs from its
// server's log (the log messages of every server, a stdio server's stderr)
// until release is called. A run lends its secret inputs' values to each
// session it uses, for as long as it uses it; a session shared by several
// runs (mcpflow server) scrubs the secrets of all of them, each value
// counted once per holder.
//
// release first lets what the server said before it reach the log scrubbed
// with values: log messages read from the connection are scrubbed as they
// arrive, and a stdio server's stderr is drained up to that moment (see
// stderrPump). Only then are values forgotten. release is idempotent; after
// Close it only forgets.
func (s *Session) HoldSecrets(values []string) (release func()) {
	s.secrets.add(values)
	var once sync.Once
	return func() {
		once.Do(func() {
			if s.stderr != nil {
				s.stderr.drain()
			}
			s.secrets.remove(values)
		})
	}
}

// secretSet is a multiset of secret values, and a view of them that
// scrubs. The zero value is empty and ready to use; it is safe for
// concurrent use.
type secretSet struct {
	mu     sync.Mutex
	counts map[string]int
	view   *secretView // nil when nothing is held; replaced, never changed
}

// secretView is the values of a secretSet at one moment.
type secretView struct {
	values  map[string]bool
	longest int               // the length of the longest value
	r       *strings.Replacer // replaces every value, the longest first at any position
}

func (s *secretSet) add(values []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range values {
		if v == "" {
			continue
		}
		if s.counts == nil {
			s.counts = map[string]int{}
		}
		s.counts[v]++
		changed = changed || s.counts[v] == 1
	}
	if changed {
		s.rebuild()
	}
}

func (s *secretSet) remove(values []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range values {
		n, ok := s.counts[v]
		switch {
		case !ok:
		case n > 1:
			s.counts[v] = n - 1
		default:
			delete(s.counts, v)
			changed = true
		}
	}
	if changed {
		s.rebuild()
	}
}

// rebuild makes the view of the values held. Called with s.mu held.
// strings.Replacer prefers, at each position, the earliest pair given: the
// values go longest first (then in byte order, so that no map order
// decides), and a secret that contains another is replaced whole. It makes
// one pass: a value inside Redacted is not replaced again.
func (s *secretSet) rebuild() {
	if len(s.counts) == 0 {
		s.view = nil
		return
	}
	v := &secretView{values: make(map[string]bool, len(s.counts))}
	sorted := make([]string, 0, len(s.counts))
	for value := range s.counts {
		sorted = append(sorted, value)
		v.values[value] = true
	}
	slices.SortFunc(sorted, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	v.longest = len(sorted[0])
	pairs := make([]string, 0, 2*len(sorted))
	for _, value := range sorted {
		pairs = append(pairs, value, Redacted)
	}
	v.r = strings.NewReplacer(pairs...)
	s.view = v
}

// current is the values held now; nil when there are none.
func (s *secretSet) current() *secretView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.view
}

// scrub returns text with every value held replaced by Redacted.
func (s *secretSet) scrub(text string) string {
	if v := s.current(); v != nil {
		return v.r.Replace(text)
	}
	return text
}

// scrubJSON returns JSON with the values held removed where it is read as
// text: from every string (object keys included), and in place of a number
// whose text is one. JSON that holds none, or that is not JSON, comes back
// as it is.
func (s *secretSet) scrubJSON(raw json.RawMessage) json.RawMessage {
	view := s.current()
	if view == nil || len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	v, changed := view.scrubValue(v)
	if !changed {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// scrubValue scrubs a decoded JSON value (numbers as json.Number),
// reporting whether anything was replaced.
func (view *secretView) scrubValue(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		y := view.r.Replace(x)
		return y, y != x
	case json.Number:
		// A secret number shows as its text: 1234 for the value "1234".
		f, err := x.Float64()
		if view.values[x.String()] || err == nil && view.values[strconv.FormatFloat(f, 'f', -1, 64)] {
			return Redacted, true
		}
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = view.scrubValue(e)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			e, c := view.scrubValue(e)
			key := view.r.Replace(k)
			changed = changed || c || key != k
			out[key] = e
		}
		return out, changed
	}
	return v, false
}
