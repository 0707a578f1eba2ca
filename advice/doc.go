// Package advice words what a person does about a run that waits: the
// exact mcpflow commands that approve or reject a gate, answer a server's
// question, resolve a call whose outcome is unknown and continue the run
// ([Blocked]). It is the CLI's wording, shared by the front ends that
// quote the CLI to a person: the CLI itself and the MCP server (package
// mcpapi), which tells an agent what its user must type.
//
// # Caveats
//
//   - The words name CLI commands: a front end that offers its own way to
//     act (the web UI's forms) words its own advice instead.
//   - Nothing here acts: it reads a report and writes text. Secret inputs
//     never reach it (a report's run is shown redacted).
package advice
