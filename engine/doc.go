// Package engine runs workflows: it loads and validates the YAML
// ([Load] → [Workflow]), evaluates ${{ … }} references, and executes steps
// through the durable invoke path: journal the intent, send the tools/call,
// journal the outcome. The [Engine] owns the run loop and reports progress
// as [Event]s; it never prints.
//
// # Caveats
//
//   - Expressions are plain references for now: ${{ inputs.NAME }} and
//     ${{ steps.ID.PATH }}, where PATH walks structuredContent, text, isError
//     or content.
//   - A call whose connection was lost is never re-sent by the engine unless
//     the replay policy (package replay) clears it.
package engine
