// Package journal is mcpflow's write-ahead record of every workflow run and
// every MCP tools/call: the product's memory after a crash and its audit trail.
//
// The core types are [Journal] (one bbolt file), [Run] (one execution of a
// workflow), [Invocation] (one logical tools/call, with its [Attempt]s and
// operator [Resolution]s), the typed states [State] and [RunStatus], and
// [Intent], the proof that an invocation's intent is durable.
//
// # Durability
//
// Every write method returns only after its bbolt transaction has been
// committed and fsynced (bbolt syncs the data pages, then the meta page).
// When a write method returns nil, the fact it wrote survives a crash of this
// process or of the machine; when it returns an error, nothing of that write
// is visible. Concurrent writers share commits (group commit, see
// [Journal.Begin]); a lone writer never waits on a timer.
//
// [Journal.Begin] returns an [Intent]. Callers that send a tools/call need the
// Intent (its idempotency key and attempt number), and an Intent can only be
// obtained from a committed, fsynced intent record: a call cannot be sent
// before its intent is durable.
//
// What survives a crash: every run and invocation record whose write
// returned. What a crash can leave behind: invocations in state
// [StateIntent] with no outcome (the call may or may not have reached the
// server). Resume treats those exactly like a lost connection.
//
// # Layout
//
// Records are JSON values keyed by 16-byte UUIDv7 ids, so key order is time
// order. Index buckets (by run, by state, by server and tool) hold only keys.
// The layout is private to this package; [Journal.Check] verifies that
// records and indexes agree and that every invariant holds.
//
// # Caveats
//
//   - One process at a time: the file is locked while open. A second process
//     gets [ErrLocked] after [Options.LockTimeout].
//   - Files that are not journals, damaged files and journals of a newer
//     schema are refused ([ErrNotJournal], [ErrDamaged], [ErrNewerSchema])
//     and never modified: they are validated read-only before being opened
//     for writing.
//   - The journal stores what it is given: redacting secrets is the caller's
//     job; large arguments and results are capped by the caller's limits
//     (see [CapJSON]).
package journal
