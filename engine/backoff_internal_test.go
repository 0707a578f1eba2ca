package engine

import (
	"testing"
	"time"
)

// TestBackoff: the one backoff of the engine, for a step's retries and
// for reconnecting: doubling from its base, capped, the shift bounded.
func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		n    int
		most time.Duration
		want time.Duration
	}{
		{time.Second, 0, maxBackoff, time.Second},
		{time.Second, 3, maxBackoff, 8 * time.Second},
		{time.Second, 9, maxBackoff, maxBackoff},
		{100 * time.Millisecond, 4, maxReconnectBackoff, 1600 * time.Millisecond},
		{100 * time.Millisecond, 5, maxReconnectBackoff, maxReconnectBackoff},
		{time.Millisecond, 1000, maxBackoff, maxBackoff}, // no overflow
	} {
		if got := backoff(tc.base, tc.n, tc.most); got != tc.want {
			t.Errorf("backoff(%s, %d, %s) = %s, want %s", tc.base, tc.n, tc.most, got, tc.want)
		}
	}
	for range 1000 {
		if d := jitter(time.Second); d < 500*time.Millisecond || d >= 1500*time.Millisecond {
			t.Fatalf("jitter(1s) = %s, want within [0.5s, 1.5s)", d)
		}
	}
}
