// Package bolt is the journal in one bbolt file, with its write-ahead log
// beside it: mcpflow's default storage engine, for one machine and one
// writing process at a time. It keeps the contract of package bolt
// ([journal.Store]); this page says how.
//
// # Durability
//
// Every write method (CreateRun, SetRunStatus, EndRun, RequestApproval,
// DecideApproval, DecideInAdvance, Begin, Skip, Again, Finish, Interrupted,
// Decide, Resolve, Prune) returns only after what it wrote is on disk. On the bbolt file that
// is the journal's write-ahead log (the file beside it whose name ends in
// "-wal", see wal.go): a write appends its records there and syncs them
// (one write and one fdatasync, where a bbolt commit writes a page per tree
// it touches and syncs twice). A goroutine then commits the logged records
// into the bbolt file in batches, synced as any bbolt commit; Open applies
// what the log holds beyond the file before anything reads, so a crash
// between the two loses nothing. When a write method returns nil, the fact
// it wrote survives a crash of this process or of the machine; when it
// returns an error, nothing of that write is visible. An illegal transition
// is such an error ([journal.ErrTransition]). Concurrent writers share commits
// (group commit): a write that arrives while a commit is in progress joins
// the next one, and a lone writer never waits on a timer.
//
// Reads see every write that returned: a record read by id is taken from
// the writes not yet in the file when it is there, and every other read
// waits until the file holds what was written before it began.
//
// [journal.Store.Begin] returns an [journal.Intent]. Callers that send a tools/call need
// the Intent (its idempotency key and attempt number), and Begin and
// [journal.Store.Again] return one only after the intent record is durable: a call
// cannot be sent before its intent is on disk. [journal.Store.Finish] accepts only
// Intents the journal issued.
//
// What survives a crash: every record whose write returned, exactly as it
// was written (in the file, or in the log until the next open applies
// it), and a new journal file only once complete (Open builds it in a
// temporary file and links it into place). What a crash can leave behind:
// invocations in [journal.StateIntent] whose last attempt has no outcome (the call
// may or may not have reached the server; resume treats them exactly like a
// lost connection), runs still marked running, a write that was committed
// but whose caller never learned it returned, and at worst a stray temporary
// file beside the journal. Nothing half-written: each write is one
// transaction.
//
// # Layout
//
// Records are JSON values keyed by 16-byte UUIDv7 ids, so key order is time
// order and an id's time is never before its record's creation time (ids
// the journal assigns come from its clock). Index buckets (by run, by state,
// by server and tool, runs by status) hold only keys ending in the id. The
// layout is private to this package; [Store.Check] verifies that records
// and indexes agree and that every invariant holds. The schema version is
// stored in the file; migrations from older versions run on Open.
//
// # Caveats
//
//   - The journal is two files: the bbolt file and its log beside it (both
//     0600). After a clean Close the file holds everything; after a crash,
//     what the log holds beyond the file is applied by the next open, even
//     a read-only one (which then opens the journal read-write once, as
//     the next writer would). Copy both files, or close the journal first.
//     A log entry that cannot be read while an entry after it is whole,
//     or a log that lacks entries the file has not applied, is damage
//     ([journal.ErrDamaged]) and the journal is refused, untouched (unless every
//     entry it hides is in the file already); an entry cut short at the end
//     of the log is a write that never returned. A log that is another
//     journal's, or not a log, is refused ([journal.ErrForeignLog]); a journal is
//     not created beside an orphaned log, and a journal file with two hard
//     links is refused (its log is found by name; a symbolic link is fine).
//     [Salvage] reads the log too.
//   - One process at a time: the file is locked while open. Read-only opens
//     share the lock with each other but not with a writer, so while a run
//     is going, another process (even one that only reads, such as
//     `mcpflow journal list`) gets [journal.ErrLocked] after [journal.Options.LockTimeout].
//   - Files that are not journals, damaged or truncated files and journals
//     of a newer schema are refused ([journal.ErrNotJournal], [journal.ErrDamaged],
//     [journal.ErrNewerSchema]) and never modified: Open validates them read-only,
//     and opening a valid journal writes nothing but what its log holds
//     beyond the file (and a new, empty log). Open reads the meta pages,
//     the free list and the branch pages of every tree (about one page in a
//     hundred: 25 ms for a journal of 1,000,000 invocations), not the leaf
//     pages that hold the records: each of those is checked when it is read
//     (bbolt verifies a page's id and type, records carry a checksum), and a
//     read that meets damage returns [journal.ErrDamaged] rather than crashing.
//     [Store.Check] reads every page. Open cannot tell, without reading
//     it, a leaf rewritten on purpose into a branch that points back up its
//     tree; Check can.
//   - The journal stores what it is given: redacting secrets is the caller's
//     job; large arguments and results are capped by the caller's limits
//     (see [journal.CapJSON]).
//   - Filter.Since and Export's since stop at the first id older than the
//     bound. Ids left to the journal (or made by [journal.NewID] with the real
//     clock) make that exact; an id a caller invents with an earlier time
//     than its record can hide that record from those two queries.
//   - [Store.Prune] removes finished runs in batches, each durable on its
//     own: a crash mid-prune leaves whole runs, some removed. It never
//     removes a running run or one with an unsettled invocation
//     ([journal.State.Unsettled]). The file keeps its size until [Compact], which
//     needs the journal closed everywhere and rewrites it into a new file
//     (temporary file, fsync, rename, directory fsync).
//   - [Store.Export] streams in short read transactions: each record is
//     written as it was when read, not as of one instant for the whole file.
package bolt
