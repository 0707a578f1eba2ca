// Package api is mcpflow's JSON vocabulary: the shapes of runs,
// invocations and approvals that `mcpflow -o json` prints and that
// `mcpflow server`'s HTTP API returns, one shape per noun, the same field
// names and types everywhere (docs/cli.md documents them).
//
// [Run], [Invocation], [InvocationDetail] and [Approval] are built from
// journal records by [RunOf], [InvocationOf], [InvocationDetailOf] and
// [ApprovalOf].
//
// [TimingOf] is how a run's time went (work, wall, and the gaps between,
// each with its cause), [CallTimingOf] how long a call's attempts took and
// [AttemptOutcome] how each ended: computed here once, so that the CLI and
// the web UI say the same.
//
// The engine's journal over the socket of the process that holds it
// (client.Journal, served by httpapi on the unix socket only) sends the
// journal's records as they are, with shapes for the parameters that have
// none ([Intent], [Outcome], [NextAttempt]) and a request per write
// (journal.go).
//
// # Caveats
//
//   - The shapes show what they are given: secrets must be redacted before
//     (the service layer does it).
//   - Arguments and results are left out unless asked for (payload).
//   - The time of an attempt mcpflow stopped during (interrupted) is not
//     known: it counts in no call's time nor in a run's work, and the
//     time until the resume that found it is a gap (GapStopped).
package api
