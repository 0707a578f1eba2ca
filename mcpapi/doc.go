// Package mcpapi is mcpflow as an MCP server: each workflow of a directory
// is a tool (see [ToolName] for the names, [InputSchema] for the
// arguments, [Annotate] for the hints), beside two read-only tools over
// the journal, list_runs and show_run. A [Server] works over the contract
// service.API, so it serves the same whether its process holds the journal
// (service.Local: `mcpflow mcp` over stdio) or another does (client.Client
// over the workspace socket), and `mcpflow server` serves it over
// streamable HTTP at /mcp behind the API's own Host and token checks.
//
// Calling a workflow's tool starts a durable run, the path `mcpflow run`
// takes, with its inputs typed from the arguments; the caller's progress
// token receives a notification per step started and finished; the
// workflow's outputs come back as structuredContent. A run that fails is a
// tool error with the run's error; a run that blocks (an approval gate, an
// outcome unknown, a question for a person) is a tool error that names the
// run, what waits and the operator's exact commands (package advice).
//
// # Caveats
//
//   - Approving a gate, answering a question and resolving an unknown
//     outcome stay with people: no tool does any of them, whatever its
//     arguments, and no argument of a workflow's tool reaches them.
//   - Hints are only as good as discovery: a server that cannot be reached
//     (or may not be started by a command that only looks, see
//     service.Tools) makes its steps count as unknown, and the workflow's
//     hints the safe defaults: not read-only, not idempotent, destructive.
//     A session lists the workflows as they were when it started (stdio:
//     when `mcpflow mcp` started); a server's tools, as discovered, are
//     kept for Options.DiscoverTTL.
//   - A tool call that the client cancels cancels a run going in this
//     process (journaled as cancelled; `mcpflow resume` continues it); a
//     run going in another process (mcpflow server) goes on there.
//   - Argument values never appear in what this package logs; a secret
//     input's value is cut from an error before the caller sees it.
package mcpapi
