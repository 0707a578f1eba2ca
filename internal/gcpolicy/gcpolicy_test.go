package gcpolicy

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Setenv("GOGC", "")
	Apply()
	if got := debug.SetGCPercent(100); got != Percent {
		t.Errorf("GC percent %d, want %d", got, Percent)
	}

	// The environment wins.
	debug.SetGCPercent(150)
	t.Setenv("GOGC", "150")
	Apply()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("with GOGC=150: GC percent %d", got)
	}
}

func TestLimitServer(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	t.Setenv("GOMEMLIMIT", "")
	LimitServer()
	if got := debug.SetMemoryLimit(-1); got != ServerLimit {
		t.Errorf("memory limit %d, want %d", got, ServerLimit)
	}

	// The environment wins.
	debug.SetMemoryLimit(1 << 30)
	t.Setenv("GOMEMLIMIT", "1GiB")
	LimitServer()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("with GOMEMLIMIT=1GiB: memory limit %d", got)
	}
}
