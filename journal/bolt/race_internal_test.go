//go:build race

package bolt

// raceEnabled: the race detector is on. sync.Pool then drops items at
// random, so allocation counts are not exact.
const raceEnabled = true
