// Package service is mcpflow as every front end uses it: the CLI today, the
// HTTP API of `mcpflow server` next. A [Service] works on one journal and
// offers Run, Resume, Call, Resolve, Decide (an approval's decision; the
// contract's Approve continues the run too) and Cancel, the queries (runs,
// invocations, servers, tools with their replay verdicts) and validation,
// as request and report types. Methods that run anything take a context
// (cancelling it cancels the run, journaled) and a sink for engine.Events,
// and return the durable record: the run and its invocations as committed.
//
// Below it, package engine runs workflows with one attempt loop; above it,
// front ends only parse their input and present what comes back.
//
// # Caveats
//
//   - The service builds, per run, the server pool and the trust resolver
//     (package trust) the engine uses; server and workspace trust are read
//     from the files as they are at each decision.
//   - A run's sessions answer their servers' sampling requests with the
//     provider the workspace's mcpflow.yaml names (package sampling),
//     every request through one function (sampler.send), which the engine
//     calls for the call that asked, once the request is journaled (and,
//     under approve: true, approved); sessions made only to look declare
//     the capability and refuse every request.
//   - Cancel reaches only runs going in this process.
//   - Errors a user can fix by changing the request wrap [ErrInvalid].
package service
