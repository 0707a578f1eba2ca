// Package door is how a process reaches a workspace's journal: it opens
// the store a location names — a bbolt file ([bolt.Open]) or a PostgreSQL
// database ([postgres.Open]) — keeps the file's maintenance (compact,
// salvage) behind the same location, and starts mcpflow's HTTP API over a
// service that holds the journal ([NewServer] for `mcpflow server`, [Own]
// for a command that holds it for one run), so that front ends speak of
// locations, the journal's contract and service.API, never of storage
// engines or of the server's insides.
package door

import (
	"context"
	"fmt"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/postgres"
)

// OpenStore opens the journal at location: a PostgreSQL URL
// (postgres://… or postgresql://…, see [postgres.Open]) or the path of a
// bbolt file (see [bolt.Open]). On an error the Store is nil, not a nil
// *postgres.Store or *bolt.Store in a Store: a caller's j != nil means
// open.
func OpenStore(location string, o *journal.Options) (journal.Store, error) {
	if journal.IsPostgres(location) {
		p, err := postgres.Open(context.Background(), location, o)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	j, err := bolt.Open(location, o)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Compact rewrites the bbolt journal at location into a new file without
// its free pages (see [bolt.Compact]). A PostgreSQL journal is refused:
// the database keeps its own space.
func Compact(location string) (before, after int64, err error) {
	if journal.IsPostgres(location) {
		return 0, 0, fmt.Errorf("compact %s: not a bbolt file: PostgreSQL reclaims space itself", journal.Redact(location))
	}
	return bolt.Compact(location)
}

// Salvage copies what can be read of the damaged bbolt journal at
// location into a new journal at dst (see [bolt.Salvage]). A PostgreSQL
// journal is refused.
func Salvage(location, dst string, key *journal.Key) (bolt.SalvageReport, error) {
	if journal.IsPostgres(location) {
		return bolt.SalvageReport{}, fmt.Errorf("salvage %s: not a bbolt file: a PostgreSQL journal is restored from the database's backups", journal.Redact(location))
	}
	return bolt.Salvage(location, dst, key)
}

// SchemaVersion is the schema of the journal files this build writes
// ([bolt.SchemaVersion]); a PostgreSQL journal has its own
// ([postgres.SchemaVersion]).
const SchemaVersion = bolt.SchemaVersion
