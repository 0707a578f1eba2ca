package postgres

import "github.com/mcpflow/mcpflow/journal"

// Hooks for the tests in package postgres_test.

// HoldUncommitted makes this session hold run at epoch as a creation
// does before its transaction commits: held here, not yet in the table.
func (p *Store) HoldUncommitted(run journal.ID, epoch int64) { p.leases.hold(run, epoch) }

// PipedCommits counts the groups of writes committed in one pipeline.
func (p *Store) PipedCommits() int64 { return p.piped.Load() }

// OnClaimRead sets what is called once a claim's rows are read, before
// its commit, with the claim's backend.
func (p *Store) OnClaimRead(f func(pid uint32)) { p.claimRead = f }
