// Package meta names the _meta keys of MCP requests that mcpflow writes
// and reads, in one place: the engine sets them, the client layer and the
// demo server read them.
package meta

const (
	// IdempotencyKey carries the invocation id on every tools/call, the
	// same on every attempt: a server that keeps it can drop a repeat.
	IdempotencyKey = "io.mcpflow/idempotency-key"
	// LogLevel is a request's log level on the protocol that has no
	// logging/setLevel (2026-07-28).
	LogLevel = "io.modelcontextprotocol/logLevel"
)
