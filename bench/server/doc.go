// Package server benchmarks `mcpflow server` holding a thousand runs at
// once against the demo MCP server, over stdio and over streamable HTTP,
// beside the same calls made bare with go-sdk (BenchmarkThousandRuns).
// It is a module of its own, so that the root module's `go test ./...`
// neither builds nor runs it; see README.md.
package server
