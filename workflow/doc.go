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
//   - YAML anchors and aliases are read as the YAML spec says, by the
//     positioned reader shared with server configuration.
package workflow
