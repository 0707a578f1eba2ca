package journal

import (
	"time"
)

// Leases: several processes — mcpflow server workers, and commands that
// run a workflow themselves — share a PostgreSQL journal. Each read-write
// open is a worker session: a row of mcpflow_workers whose lease its
// heartbeat extends. A run is worked on by one session at a time: the
// session in the run's row, with the run's epoch. A run is free when no
// live session holds it: its session's lease expired (the process is
// paused, partitioned or gone) or its session's database connection is
// gone (the process died). Taking a run bumps its epoch, and every write a
// process makes for a run it holds is checked against that epoch in the
// write's transaction (fencing): a process that lost a run to another
// writes nothing more for it. Leases keep work moving; the epoch keeps it
// safe.

// DefaultLease is how long a session's runs stay its own without a
// heartbeat; the heartbeat comes every third of it.
const DefaultLease = 10 * time.Second

// Worker is a process working on a PostgreSQL journal, as
// [Postgres.Workers] reports it.
type Worker struct {
	ID   string `json:"id"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Serves: a server that claims submitted and orphaned runs; false for
	// a command that runs only its own.
	Serves      bool      `json:"serves"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	LeaseUntil  time.Time `json:"lease_until"`
	// Live: its lease holds and its connection is open.
	Live bool `json:"live"`
	// Runs are the runs it holds.
	Runs []ID `json:"runs"`
}
