package bolt

import (
	"github.com/mcpflow/mcpflow/journal"
)

// indexed reports whether the state index lists invocations in s. Most
// invocations end completed: listing them would cost every step a write of
// the index's page, and a query for completed invocations finds them at
// once among the newest records anyway. The index keeps the states that are
// rare and must be found among many: unsettled, failed, skipped. (Journals
// written before keep entries for completed invocations; they are never
// read, and Check accepts them.)
func indexed(s journal.State) bool { return s != journal.StateCompleted }
