// Package api is mcpflow's JSON vocabulary: the shapes of runs,
// invocations and approvals that `mcpflow -o json` prints and that
// `mcpflow server`'s HTTP API returns, one shape per noun, the same field
// names and types everywhere (docs/cli.md documents them).
//
// [Run], [Invocation], [InvocationDetail] and [Approval] are built from
// journal records by [RunOf], [InvocationOf], [InvocationDetailOf] and
// [ApprovalOf].
//
// # Caveats
//
//   - The shapes show what they are given: secrets must be redacted before
//     (the service layer does it).
//   - Arguments and results are left out unless asked for (payload).
package api
