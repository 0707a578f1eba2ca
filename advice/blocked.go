package advice

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/elicit"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/replay"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
)

// Blocked says why a run is blocked and what to do: each invocation
// waiting for an operator and each step waiting for approval, and the
// commands that resolve, approve or reject them and continue (a decision
// continues the run itself). A run blocked for a server's login
// (engine.CodeLoginRequired) has nothing to resolve: its error names the
// login to run, and resume continues it.
func Blocked(w io.Writer, rep *service.Report) {
	run := rep.Run
	msg := "an invocation's outcome is unknown"
	if run.Error != nil {
		msg = run.Error.Error()
	}
	fmt.Fprintf(w, "mcpflow: run %s is blocked: %s\n", run.ID.Short(), msg)
	example := "ID"
	waiting := rep.Waiting()
	for _, inv := range waiting {
		fmt.Fprintf(w, "  waiting for you: invocation %s, step %s, %s (%s)\n", inv.ID.Short(), stepName(&inv), api.TargetOf(&inv), inv.State)
		if what := whatHappened(&inv); what != "" {
			fmt.Fprintf(w, "    what happened: %s\n", what)
		}
		if why := notReplayed(&inv); why != "" {
			fmt.Fprintf(w, "    not replayed: %s\n", why)
		}
		example = inv.ID.Short()
	}
	approvals := run.PendingApprovals()
	for _, a := range approvals {
		fmt.Fprintf(w, "  waiting for approval: step %s%s (nothing of it was journaled or sent)\n", a.Step, Quoted(a.Message))
	}
	asking := rep.WaitingInput()
	for _, inv := range asking {
		fmt.Fprintf(w, "  waiting for your answer: step %s asks %s (the tool has not run)\n", stepName(&inv), Question(&inv))
	}
	if len(asking) > 0 {
		fmt.Fprintf(w, "  inspect:  mcpflow runs show %s (the question and its fields)\n", run.ID.Short())
	} else {
		fmt.Fprintf(w, "  inspect:  mcpflow runs show %s\n", run.ID.Short())
	}
	if len(asking) > 0 {
		for _, inv := range asking {
			how := "--field NAME=VALUE... | --decline | --cancel"
			if strings.Contains(Question(&inv), "--approve") {
				how = "--approve | --decline"
			}
			fmt.Fprintf(w, "  answer:   mcpflow answer %s %s %s\n", run.ID.Short(), inv.Step, how)
		}
		if len(waiting) == 0 && len(approvals) == 0 {
			fmt.Fprintln(w, "  an answer continues the run (with --no-continue: mcpflow resume "+run.ID.Short()+")")
			return
		}
	}
	login := run.Error != nil && run.Error.Code == engine.CodeLoginRequired
	if len(waiting) > 0 || len(approvals) == 0 && len(asking) == 0 && !login {
		fmt.Fprintf(w, "  resolve:  mcpflow journal resolve %s --as completed --result FILE | --as failed --reason TEXT | --as retry --reason TEXT\n", example)
	}
	for _, a := range approvals {
		fmt.Fprintf(w, "  approve:  mcpflow approve %s %s [--reason TEXT]\n", run.ID.Short(), a.Step)
		fmt.Fprintf(w, "  reject:   mcpflow reject %s %s [--reason TEXT]\n", run.ID.Short(), a.Step)
	}
	if len(waiting) == 0 && len(approvals) > 0 {
		// A decision continues the run itself.
		fmt.Fprintf(w, "  either continues the run (with --no-continue: mcpflow resume %s)\n", run.ID.Short())
		return
	}
	if login && len(waiting) == 0 {
		fmt.Fprintf(w, "  continue: mcpflow resume %s, once logged in\n", run.ID.Short())
		return
	}
	fmt.Fprintf(w, "  continue: mcpflow resume %s\n", run.ID.Short())
}

// Quoted is an approver's message as the blocked-run message shows it.
func Quoted(msg string) string {
	if msg == "" {
		return ""
	}
	return fmt.Sprintf(": %q", msg)
}

// whatHappened says what became of a call whose outcome is unknown, before
// why it was not sent again: its newest attempt's failure, and how long
// that attempt went.
func whatHappened(inv *journal.Invocation) string {
	a := inv.LastAttempt()
	if a == nil || a.Failure == "" {
		return ""
	}
	took := ""
	if a.EndedAt != nil {
		took = " after " + a.EndedAt.Sub(a.SentAt).Round(100*time.Millisecond).String()
	}
	switch a.Failure {
	case replay.ClassTimedOut:
		return "the call timed out" + took + "; it may have run"
	case replay.ClassLost:
		return fmt.Sprintf("the connection to server %s was lost%s while the call was in flight; it may have run", inv.Server, took)
	case replay.ClassServerError:
		return "the server answered with an error" + took + "; the tool may have run"
	case replay.ClassAborted:
		return "interrupted" + took + " while the call was in flight; it may have run"
	}
	return strings.ReplaceAll(string(a.Failure), "_", " ") + took
}

// notReplayed says why the replay rule did not clear sending an invocation
// again, and what would, from its newest decision.
func notReplayed(inv *journal.Invocation) string {
	d := inv.LastDecision()
	if d == nil || (d.Verdict != "outcome_unknown" && d.Verdict != "not_retried") {
		return ""
	}
	switch d.Reason {
	case "server_not_trusted":
		return fmt.Sprintf("server %q is not trusted — set trust: true on its entry if its tools' declarations can be relied on", inv.Server)
	case "workspace_not_trusted":
		return "this workspace is not trusted — mcpflow trust add, or --trust-workspace for one command"
	case "no_annotations":
		return fmt.Sprintf("tool %s declares no annotations, so it is not known to be safe to repeat", inv.Tool)
	case "not_declared_idempotent_or_read_only":
		return fmt.Sprintf("tool %s declares neither idempotentHint: true nor readOnlyHint: true", inv.Tool)
	case "contradictory_read_only":
		return fmt.Sprintf("tool %s declares readOnlyHint: true with destructiveHint: true or idempotentHint: false", inv.Tool)
	case "malformed_annotations":
		return fmt.Sprintf("tool %s's annotations are malformed (see mcpflow servers tools %s)", inv.Tool, inv.Server)
	case "budget_spent":
		return "it was replayed as often as allowed already"
	case "tool_missing":
		return fmt.Sprintf("tool %s is no longer listed by server %s", inv.Tool, inv.Server)
	}
	return d.Reason
}

// Question is what a call waiting for input asks: the message of its
// first unanswered elicitation, quoted, or the method of its request.
func Question(inv *journal.Invocation) string {
	in := inv.WaitingInput()
	if in == nil {
		return "nothing"
	}
	reqs, err := in.Parsed()
	if err != nil {
		return "a question mcpflow cannot read"
	}
	for _, r := range reqs {
		if in.Answer(r.Key) != nil || r.Method == upstream.MethodCreateMessage {
			continue
		}
		if r.Method == engine.MethodApprove {
			return "for approval to send its sampling request to the provider (--approve or --decline)"
		}
		if q, err := elicit.Parse(r.Params); err == nil && r.Method == elicit.Method {
			if q.Mode == "url" {
				return fmt.Sprintf("%q, at %s", q.Message, q.URL)
			}
			return fmt.Sprintf("%q", q.Message)
		}
		return "for " + r.Method
	}
	return "nothing more"
}

// stepName is an invocation's step, with its item of a for_each.
func stepName(inv *journal.Invocation) string {
	if inv.Item >= 0 {
		return fmt.Sprintf("%s[%d]", inv.Step, inv.Item)
	}
	return inv.Step
}
