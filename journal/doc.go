// Package journal is mcpflow's write-ahead record of every workflow run and
// every MCP tools/call: the product's memory after a crash and its audit
// trail. It holds what every storage engine shares — the vocabulary, the
// contract and the writer's rules — and no engine itself:
//
//   - the records: [Run] (one execution of a workflow, with the [Approval]
//     gates of its steps), [Invocation] (one logical request — a
//     tools/call, or a resources/read or prompts/get: its [Method] — with its
//     [Attempt]s — each with why it was sent, its [AttemptKind], and what
//     its outcome proved, its failure class; [Invocation.Tally] is the one
//     count of them — replay [Decision]s and operator [Resolution]s), their
//     ids ([ID], UUIDv7: key order is time order);
//   - the typed states [State], [RunStatus] and [ApprovalState] with their
//     checked transitions (state.go is the only place that defines them);
//   - [Store], the contract every engine keeps, and [Shared], what a
//     journal that several workers share offers beyond it;
//   - the writer's rules ([Writer]): legal transitions, attempts, decisions,
//     resolutions and approvals, written once for every engine, each write
//     a function of one transaction ([Tx]) that the engine commits durably,
//     shared by concurrent writers ([GroupCommit]);
//   - sealing ([Key], [Sealer]: payloads encrypted, arguments digested with
//     a keyed HMAC), the record encoding and its checksum, the invariants
//     Check verifies ([CheckRun], [CheckInvocation]), and the archive
//     format that moves a journal between engines (Import, [RunLine]).
//
// The engines are journal/bolt (one bbolt file and its write-ahead log:
// the default) and journal/postgres (a PostgreSQL database that several
// workers share, with leases and fencing). Package door opens the one a
// location names. Packages that need only the vocabulary (api, trust,
// workflow) link neither bbolt nor pgx.
//
// # The contract
//
// Every write method of a [Store] (CreateRun, SetRunStatus, EndRun,
// RequestApproval, DecideApproval, DecideInAdvance, Begin, Skip, Again,
// Finish, Interrupted, Decide, Resolve, Prune) returns only after what it
// wrote is durable; when it returns an error, nothing of that write is
// visible. An illegal transition is such an error ([ErrTransition]). A
// write queued with a Later method ([Pending]) rides with the next commit
// and is durable once Wait returns nil. Reads see every write that
// returned.
//
// [Store.Begin] returns an [Intent]. Callers that send a tools/call need
// the Intent (its idempotency key and attempt number), and Begin and
// [Store.Again] return one only after the intent record is durable: a call
// cannot be sent before its intent is on disk. [Store.Finish] accepts only
// Intents the journal issued. A journal another process holds relays them
// ([Relayed]): its client makes an Intent valid only from the owner's
// answer to a durable Begin or Again.
//
// What a crash can leave behind, on any engine: invocations in
// [StateIntent] whose last attempt has no outcome (the call may or may not
// have reached the server; resume treats them exactly like a lost
// connection), runs still marked running, and a write that was committed
// but whose caller never learned it returned. Nothing half-written: each
// write is one transaction.
//
// The journal stores what it is given: redacting secrets is the caller's
// job; large arguments and results are capped by the caller's limits (see
// [CapJSON]).
package journal
