// Package engine runs workflows: it loads and validates the YAML
// ([Load] → [Workflow]), evaluates ${{ … }} references, and executes steps
// through the durable invoke path: journal the intent, send the tools/call,
// journal the outcome. The [Engine] owns the run loop and reports progress
// as [Event]s; it never prints.
//
// # Caveats
//
//   - Expressions are CEL (cel.dev), compiled and checked when the workflow
//     loads, each evaluation bounded by a cost and a time limit. Their types
//     are dynamic (JSON from tools), so most type errors show at run time,
//     naming the step and the expression.
//   - Resume re-reads the environment variables a workflow lists; the
//     journal does not keep them (they may be secrets).
//   - A call whose connection was lost is never re-sent by the engine unless
//     the replay policy (package replay) clears it.
package engine
