// Package demo is the built-in demo MCP server behind `mcpflow demo-server`.
//
// It exists so that mcpflow's replay machinery can be exercised end to end
// without a third-party server: its tools declare every annotation shape the
// replay rule distinguishes, every execution is counted in a ledger file, and
// faults can kill the process or drop a connection right after a side effect
// committed — the moment at which "did it run?" has no answer on the client.
//
// [Serve] runs the server over stdio (the default), streamable HTTP at /mcp
// (Config.HTTPAddr) or the older SSE transport at /sse (Config.SSEAddr).
// [Config.AddFlags] wires the configuration to command-line flags whose
// defaults come from MCPFLOW_DEMO_* environment variables.
//
// # Tools
//
// Annotations are sent exactly as declared here: a hint not listed is absent
// from the JSON, not false.
//
//	tool                input                      result                                   annotations declared
//	greet               name (required)            "Hello, NAME!", {"greeting": ...}        readOnlyHint:true
//	upper               text (required)            TEXT upper-cased, {"text": ...}          idempotentHint:true
//	ledger_append       entry (required)           "appended row N", {"row": N}             none (no annotations object)
//	put_record          key, value (required)      {"key": ..., "value": ...}               destructiveHint:true, idempotentHint:true
//	not_idempotent      entry                      like ledger_append                       idempotentHint:false
//	contradictory_read  entry                      like ledger_append                       readOnlyHint:true, idempotentHint:false
//	ledger_count        (none)                     {"rows": lines before this call's}       readOnlyHint:true, destructiveHint:false
//	count_slowly        n (5, max 1000),           notifications/progress every step,       readOnlyHint:true
//	                    delay_ms (50)              then "counted to N", {"count": N}
//	fail                message                    isError, text message ("demo failure")   readOnlyHint:true
//	media               (none)                     one content item of every type: text,    readOnlyHint:true
//	                                               image, audio, resource_link, resource
//	                                               (text, then blob)
//	log                 message (required),        notifications/message (logger "demo")    readOnlyHint:true
//	                    level ("info"),            at level, and one at debug; with stderr,
//	                    stderr (false)             the line "demo: log LEVEL: MESSAGE" on
//	                                               stderr first; "logged at LEVEL"
//	sample              prompt (required),         asks the client's model                  none; listed only to clients
//	                    max_tokens (100)           (sampling/createMessage), then its text, that declare sampling
//	                                               {"text", "model", "stopReason"}
//
// On the protocol of 2026-07-28 sample is a multi round-trip tool: its
// first round answers with an input request, and the call that brings the
// answer runs. On older protocols it sends sampling/createMessage itself
// during the call. Either way it runs (its ledger line, its faults) only
// once the model answered: a client that refuses, or whose model fails,
// gets a tool error (isError) that quotes the client's error.
// Config.Protocol (--protocol VERSION, env MCPFLOW_DEMO_PROTOCOL) caps the
// versions the server speaks: with 2025-11-25, clients initialize as before
// 2026-07-28.
//
// # Resources and prompts
//
// Reads change nothing and leave no ledger line.
//
//	resource                   contents
//	file:///demo/notes.txt     text/plain: "note 1" to "note 8", a line each
//	file:///demo/logo.bin      application/octet-stream: the bytes 0 to 7 (blob "AAECAwQFBgc=")
//	demo://greeting/{name}     a template; text/plain "Hello, NAME!"
//
//	prompt   arguments                          messages
//	review   text (required), focus (optional)  user: "Please review the following text[, focusing on FOCUS]:\n\nTEXT",
//	                                            assistant: "I will review it."; description "A review of a text"
//
// go-sdk servers always send readOnlyHint and idempotentHint, false or not.
// The demo server instead rewrites its tools/list results to the declared
// shapes, with receiving middleware that wraps the SDK's result in a type
// whose JSON carries the declared annotations. Config.SDKHints turns the
// rewrite off, so that clients can be tested against the SDK's default shape
// too (greet then reads {"readOnlyHint":true,"idempotentHint":false}).
// Config.Annotations (--annotations TOOL=JSON, env MCPFLOW_DEMO_ANNOTATIONS
// one a line) sends any JSON as a tool's annotations, exactly: a malformed
// declaration such as {"idempotentHint":null} included.
//
// # Ledger
//
// Every execution of every tool appends one line to the ledger
// (Config.Ledger, default [DefaultLedger]):
//
//	{"seq":N,"tool":"NAME","args":{...},"idempotency_key":"..."}
//
// seq is the line's 1-based number in the file, args the call's arguments as
// received, and idempotency_key the call's _meta["io.mcpflow/idempotency-key"]
// ("" if absent). The line is fsynced before the tool replies. Directories
// are created 0700, the file 0600. With Config.NoLedger (--no-ledger, env
// MCPFLOW_DEMO_NO_LEDGER=1) no line is written and row-returning tools answer
// row 0: a benchmark's calls then cost no fsync in the demo server.
//
// With Config.LedgerEnds (--ledger-ends, env MCPFLOW_DEMO_LEDGER_ENDS=1) a
// call that ends without answering adds a second line, with the call's key:
//
//	{"seq":M,"tool":"cancelled","args":{"tool":"NAME","row":N},"idempotency_key":"..."}
//
// "cancelled" when the client cancelled the call (notifications/cancelled:
// go-sdk cancels the call's context with no other cause), "abandoned" when
// the connection ended under it (the context's cause is the read error); row
// is the call's execution line. Off by default, so that the ledger of every
// other test counts executions only.
//
// # Faults
//
// Config.Fault injects a failure into every call of Config.FaultTool (every
// tool if empty), or into every read of the resource (or template) or get of
// the prompt it names — never into a read when it is empty. A read commits
// nothing: the -after-commit modes fire without a ledger line, and a drop
// exits:
//
//	exit-after-commit       append the ledger line, then exit with status 17 without replying
//	exit-after-commit-once  the same, only if <ledger>.fault-fired does not exist yet;
//	                        creates and fsyncs it before exiting
//	exit-before-commit      exit with status 17 before appending
//	drop-after-commit       append, then close the HTTP connection that would carry the reply;
//	                        the process keeps running (exits as above on stdio)
//	drop-after-commit-once  drop-after-commit guarded by the marker file, like exit-after-commit-once
//	hang-after-commit       append, then never reply until the call is cancelled or Serve stops
//	rpc-error-after-commit  append, then answer with a JSON-RPC error response, code -32603
//	                        "internal error" (the tool may have run)
//	reject-before-commit    answer with a JSON-RPC error response, code -32602 "invalid params",
//	                        without appending (the tool provably did not run)
//
// The two rpc-error modes answer with a real JSON-RPC error (the response's
// "error" member), not a result with isError: true. go-sdk's typed tool
// handlers turn any error into an isError result except a *jsonrpc.Error
// returned as is, which it passes through to the wire.
//
// Over streamable HTTP the dropped connection is the one of the POST carrying
// the tools/call; over SSE it is the session's GET stream, which carries all
// of that session's replies. Config.Delay is slept before every execution,
// before any fault.
//
// # Caveats
//
//   - A call whose arguments fail the input schema (a missing required
//     field, n above 1000) is answered with an isError result by the SDK
//     before the tool runs: it is not an execution and leaves no ledger line.
//   - seq survives a change of server process: an append reads the ledger
//     again when another process wrote it since this one last did (otherwise
//     it counts on, reading nothing). Appends are serialized within one
//     process only. Do not point two live servers at one ledger.
//   - On stdio, EOF on stdin ends the server at once: go-sdk cancels the
//     requests still in flight, so a client that writes requests and closes
//     stdin right away (echo ... | mcpflow demo-server) may get no answers
//     and leave no ledger lines. Keep stdin open until the replies arrived.
//   - Faults that exit end the whole process with status 17 in every mode,
//     including HTTP, without flushing anything else.
//   - The -once marker lives beside the ledger and is never removed by the
//     server; delete it to re-arm the fault.
//   - With both HTTPAddr and SSEAddr set, Serve listens on both and writes one
//     "listening on" line for each.
//   - The rewrite is done in middleware rather than with MCPGODEBUG=hintomitempty=1
//     because go-sdk reads MCPGODEBUG once, at init, for the whole process
//     (clients included). If that variable is set anyway, the SDKHints shape
//     loses its false booleans.
//   - Annotations are hints; the demo server's are deliberately varied and
//     some (contradictory_read) are contradictory on purpose.
package demo
