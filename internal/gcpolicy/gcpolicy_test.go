package gcpolicy

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	Apply()
	if got := debug.SetGCPercent(-1); got != Percent {
		t.Errorf("GC percent %d, want %d", got, Percent)
	}
	if got := debug.SetMemoryLimit(-1); got != Limit {
		t.Errorf("memory limit %d, want %d", got, Limit)
	}

	// The environment wins.
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	Apply()
	if got := debug.SetGCPercent(-1); got != 150 {
		t.Errorf("with GOGC=150: GC percent %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: limit changed to %d", got)
	}
}
