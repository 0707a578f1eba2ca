package bolt

import (
	"sync"

	"github.com/mcpflow/mcpflow/journal"
	bbolt "go.etcd.io/bbolt"
)

// sealers finds the sealer of a journal's database from a transaction.
var sealers sync.Map // *bbolt.DB → *journal.Sealer

func sealerOf(tx *bbolt.Tx) *journal.Sealer {
	if s, ok := sealers.Load(tx.DB()); ok {
		return s.(*journal.Sealer)
	}
	return nil
}
