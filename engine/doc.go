// Package engine runs workflows (package workflow) through the durable
// invoke path: journal the intent, send the tools/call, journal the outcome.
// Every attempt of every invocation — a first send, a retry, a replay after
// a lost connection, a first delivery, an operator's retry on resume —
// goes through one attempt loop, which journals each with its kind
// (journal.Attempt.Kind) and its outcome's failure class, a tool error
// included; resume starts that loop from a [Plan] built by the pure
// function [PlanResume]. The retry and replay budgets are counted from the
// journal with journal.Invocation.Tally. The [Engine] owns the run loop and
// reports progress as [Event]s; it never prints.
//
// A step with resource: or prompt: sends a resources/read or a
// prompts/get (its journal.Method) through the same loop, journaled the
// same way, through a session that is a [Reader]. A read changes nothing:
// the replay rule sends it again after a lost connection or a crash
// whatever trust and annotations say, within its replay budget, and one
// whose budget is spent fails rather than blocking the run. Later steps
// see a read's contents and text, a prompt's description, messages and
// text (reads.go).
//
// A step with approve: has a gate after its condition and before anything
// of it is journaled: until an operator decides, the run stops blocked
// ([CodeApprovalRequired]) with the request journaled on the run; approved,
// the step runs on resume; rejected, it fails ([CodeApprovalRejected])
// without an intent, and continue_on_error applies as to any failure. A
// decision made in advance, before the run got to the step, is followed
// when it gets there, without stopping.
//
// A server that wants a login mcpflow cannot get without a person (an
// *oauth.LoginRequiredError from a connect, a tools/list or a request the
// server refused before acting on it) ends the step after one try with the
// run blocked ([CodeLoginRequired]); resume runs it again once someone
// logged in. A refused request is journaled as not delivered, with the
// decision to send it again (login.go).
//
// Secret inputs' values never reach what people read: the engine scrubs
// them from events and journaled errors, and lends them to every session a
// run calls through that keeps a server log (*upstream.Session, through
// [MCP]), from before the run's first call on it to the run's end, so that
// the log shows them redacted too.
//
// # Caveats
//
//   - Resume re-reads the environment variables a workflow lists; the
//     journal does not keep them (they may be secrets).
//   - A call whose connection was lost is never re-sent by the engine unless
//     the replay policy (package replay) clears it, judged on both the
//     send-time snapshot and the rediscovered tool.
package engine
