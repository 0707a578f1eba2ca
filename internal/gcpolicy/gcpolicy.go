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
//
// A long-running server holds what its runs wait with: a run whose call
// waits for a person's answer (a server that asked during the call) keeps
// its call, its session and their goroutines. Five times that live heap
// is most of what such a server takes: 10,000 waiting runs, a third of
// them with a call open, took 757 MiB of resident memory at GOGC=400
// alone. LimitServer gives `mcpflow server` a soft memory limit
// (ServerLimit), so that the target is reached earlier when the heap is
// large and the collector runs more often, not the heap grows.
//
// # Caveats
//
// The limit is soft: a server whose live heap nears it collects often
// (the runtime caps that work at half the CPU) and grows past it rather
// than fail. GOMEMLIMIT in the environment wins (GOMEMLIMIT=off: none).
package gcpolicy

import (
	"os"
	"runtime/debug"
)

// ServerLimit is the soft memory limit of `mcpflow server` when
// GOMEMLIMIT is not set: what Go maps for the heap, goroutine stacks and
// its own use, not the binary's code.
const ServerLimit = 256 << 20

// LimitServer sets a long-running server's soft memory limit, unless the
// environment sets one (GOMEMLIMIT).
func LimitServer() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(ServerLimit)
	}
}

// Percent is the GC target when GOGC is not set.
const Percent = 400

// Apply sets the target, unless the environment sets one (GOGC): a user's
// setting wins.
func Apply() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(Percent)
	}
}
