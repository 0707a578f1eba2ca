// Package workflow is mcpflow's YAML workflow language: [Load] reads a file
// with positions into a validated [Workflow] (inputs, servers, steps,
// outputs), checks every ${{ … }} reference against an explicit scope
// (declared inputs, listed env variables, earlier steps, item/index inside
// for_each), and compiles expressions (CEL) once. [Value.Eval] and
// [Expression.Eval] evaluate them against [Vars]. It runs nothing.
//
// # Caveats
//
//   - Expressions are CEL (cel.dev), each evaluation bounded by a cost and a
//     time limit. Their types are dynamic (JSON from tools), so most type
//     errors show at run time, naming the expression's own file, line and
//     column.
//   - Every error of Load names the file, line and column ([PosError]).
//     Load goes on after an error and returns every one it found, sorted by
//     position ([Errors]); a YAML syntax error ends it, as it ends the
//     parser. A plain value broken at ": " (text: ${{ a: b }}) gets a
//     hint to quote it.
//   - YAML anchors and aliases are read as the YAML spec says, by the
//     positioned reader shared with server configuration.
package workflow
