// Package postgres is the journal in a PostgreSQL database: the contract of
// package journal ([journal.Store]) for journals that must outlive a
// machine or be shared by several workers, and the capabilities of a
// shared journal ([journal.Shared]): worker sessions, leases on runs with
// fencing epochs, claims of free runs, and cancels that reach the process
// holding a run.
//
// Records are the bbolt journal's (the same JSON, checksum and sealing);
// the columns beside them are what the queries select on, readable from
// SQL. Every write is one transaction committed with synchronous_commit on
// before it returns; concurrent writers share transactions (group commit).
// A group of writes that only writes invocations of runs this process
// holds (a step: the previous outcome and the next intent) goes as one
// pipeline, one round trip, that the server runs as one implicit
// transaction and commits at its end; its statements check in the
// database what the process remembered of the records (pipeline.go).
// A write that first touches a run checks that this worker still holds
// it at the epoch it claimed ([journal.ErrLeaseLost] otherwise), before any
// rule.
package postgres
