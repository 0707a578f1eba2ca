// Package replay decides what mcpflow may do after a tools/call fails.
//
// It is pure: no I/O, no clocks, no goroutines. Every function is a
// deterministic mapping from its arguments, so a decision journaled before a
// crash is the same decision a restarted process would make.
//
// The core types:
//
//   - [Annotations] holds a tool's annotations exactly as declared on the wire:
//     each field is a [Hint] that is [Absent], [False] or [True]. Absent is not
//     false. [ParseAnnotations] reads them from raw JSON.
//   - [Class] says what a failure proves about execution, with the
//     predicates every caller goes by (it is internal/failure's class, which
//     the journal stores on each attempt). upstream.Classify maps an error
//     returned by go-sdk's ClientSession.CallTool to a Class.
//   - [Decide] applies the replay rule to an [Input] and returns a [Decision]:
//     a [Verdict] ([NotApplicable], [Replay] or [OutcomeUnknown]) and a stable,
//     machine-readable [Reason].
//   - [Safe] is the annotation-only part of the rule (the 27-row truth table in
//     docs/replay-truth-table.tsv); [Both] combines the send-time decision
//     with the decision on the re-discovered tool.
//   - [ErrOutcomeUnknown] is the stable error ([Code]) returned when a call may
//     have completed and must not be retried automatically.
//
// # Caveats
//
// Annotations are hints from the server, not an authorization. Decide counts
// them only after both trust gates (server and workspace) pass, and a replay
// needs both the send-time snapshot and the fresh view to agree ([Both]).
//
// upstream.Classify is conservative: an error it does not recognise is [ClassLost]
// (it may have executed). [ClassNotDelivered] is claimed only where go-sdk
// v1.8.0 proves the request never left the process: [mcp.ErrConnectionClosed],
// or a dial failure inside the streamable HTTP client's "rejected by
// transport" error. A server that itself answers with JSON-RPC code -32005 is
// indistinguishable from that transport marker and is classified as a
// connection loss. The mapping follows go-sdk v1.8.0; re-check it when the
// SDK is upgraded.
//
// [ParseAnnotations] matches member names exactly (encoding/json struct
// decoding would not) and, like encoding/json, keeps the last of duplicate
// members. A hint whose value is null or any other non-boolean is an error,
// not an absent field.
//
// The replay budget is counted by the caller from the journal; Decide trusts
// the count it is given.
package replay
