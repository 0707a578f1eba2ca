// Package servers connects mcpflow to MCP servers: their configuration
// ([Server]), sessions over stdio ([Connect]), discovery of tools with their
// annotations exactly as declared on the wire ([Tool]), and the wire-level
// count of tools/call requests that proves no hidden re-send happened.
//
// The built-in demo server lives in the sub-package demo.
//
// # Caveats
//
//   - go-sdk's typed ToolAnnotations cannot tell an absent readOnlyHint or
//     idempotentHint from false. This package reads the raw tools/list
//     responses instead ([Tool.Annotations]).
//   - go-sdk's multi-round-trip middleware re-sends tools/call on its own;
//     sessions made here disable it, so each journaled attempt puts exactly
//     one tools/call on the wire ([Session.CallsSent]).
//   - This package never decides whether a call may be replayed: that is
//     package replay's job.
package servers
