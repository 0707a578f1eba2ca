// Package workersbench measures how `mcpflow server` workers sharing one
// PostgreSQL journal add up: the steps per second that one worker and
// three workers reach on the same runs, calling the same demo MCP server
// over streamable HTTP. Everything is real: the built binary's worker
// processes, the database, the HTTP server. The benchmark is skipped
// without MCPFLOW_TEST_POSTGRES.
//
// # Caveats
//
// Each worker keeps at most --max-runs runs going (32 by default), so one
// worker's throughput is that many runs' worth of tool latency: three
// workers add up only while one is latency-bound rather than CPU-bound.
// On a small machine the workers, the database and the demo server share
// the cores: the benchmark prints how busy the machine was.
package workersbench
