// Package gcpolicy sets the garbage collector's target for mcpflow's
// processes.
//
// A journaled tools/call allocates little that lives: the records it
// writes and the step's result. But go-sdk (v1.8.0) decodes every JSON-RPC
// message through a fresh decoder with a 32 KiB buffer, several per call,
// so a busy process makes hundreds of KiB of garbage per step over a live
// heap of a few MiB. With Go's default target (GOGC=100) the collector
// then runs every few steps and takes 30-40% of the CPU. A target of 400
// lets the heap grow to five times what is live before a collection.
// GOMEMLIMIT caps that for a process whose live heap is large.
package gcpolicy

import (
	"os"
	"runtime/debug"
)

// Percent is the GC target when GOGC is not set.
const Percent = 400

// Apply sets the target, unless the environment sets one (GOGC): a user's
// setting wins.
func Apply() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(Percent)
	}
}
