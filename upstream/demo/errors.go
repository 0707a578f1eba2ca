package demo

import "errors"

var (
	// ErrUnknownFault is returned by [Serve] for a Fault mode it does not know.
	ErrUnknownFault = errors.New("demo: unknown fault mode")
	// ErrUnknownTool is returned by [Serve] when FaultTool names no demo
	// tool, resource or prompt.
	ErrUnknownTool = errors.New("demo: unknown tool")

	// errExitIntercepted is what a call returns after a fault called exit
	// and exit returned (only when tests replace exit).
	errExitIntercepted = errors.New("demo: fault exit intercepted")
	// errDropped is what a call returns after its connection was dropped;
	// nobody reads it.
	errDropped = errors.New("demo: connection dropped by fault")
)
