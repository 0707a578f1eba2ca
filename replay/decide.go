package replay

import (
	"encoding/json"

	"github.com/mcpflow/mcpflow/internal/verdict"
)

// Verdict is what to do with a failed invocation: NotApplicable, Replay or
// OutcomeUnknown. Its names are internal/verdict's, which the journal
// stores.
type Verdict = verdict.Verdict

const (
	NotApplicable  = verdict.NotApplicable  // the failure is not a connection loss; the policy does not apply
	Replay         = verdict.Replay         // safe: reconnect, rediscover, check again, then send again
	OutcomeUnknown = verdict.OutcomeUnknown // unsafe: stop; the call may have completed (ErrOutcomeUnknown)
)

// Reason says why a Decision was made. Values are stable snake_case strings
// that may be journaled and compared.
type Reason string

const (
	ReasonDeclaredIdempotent    Reason = "declared_idempotent"                  // Replay: idempotentHint: true
	ReasonDeclaredReadOnly      Reason = "declared_read_only"                   // Replay: readOnlyHint: true, no contradiction
	ReasonNotConnectionLoss     Reason = "not_a_connection_loss"                // the class is not ClassLost
	ReasonNotDelivered          Reason = "not_delivered"                        // never sent: sending it again is a first delivery, not a replay
	ReasonServerNotTrusted      Reason = "server_not_trusted"                   // the server's configuration lacks trust: true
	ReasonWorkspaceNotTrusted   Reason = "workspace_not_trusted"                // the workspace trust gate failed
	ReasonNoAnnotations         Reason = "no_annotations"                       // the tool sent no annotations object
	ReasonContradictoryReadOnly Reason = "contradictory_read_only"              // readOnlyHint: true with destructiveHint: true or idempotentHint: false
	ReasonNotDeclared           Reason = "not_declared_idempotent_or_read_only" // neither safe declaration
	ReasonBudgetSpent           Reason = "budget_spent"                         // the invocation has used its replays
	ReasonToolMissing           Reason = "tool_missing"                         // the tool is gone after rediscovery (Judge)
	ReasonMalformedAnnotations  Reason = "malformed_annotations"                // the annotations object does not parse (Judge)
	ReasonReadRequest           Reason = "read_request"                         // Replay: a resources/read or prompts/get, which changes nothing
	ReasonArgumentsNotJournaled Reason = "arguments_not_journaled"              // the journal does not hold the arguments whole (a proxied call's, capped): they cannot be sent again
)

// MaxReplays is the default number of replays per invocation.
const MaxReplays = 3

// Input is everything Decide needs. Trust and annotations describe one view
// of the tool: the send-time snapshot or the re-discovered tool.
type Input struct {
	Class            Class
	ServerTrusted    bool
	WorkspaceTrusted bool
	Annotations      *Annotations // as declared; nil = none sent
	// Read: the request only reads (a resources/read or a prompts/get):
	// sending it again repeats no side effect, so neither trust nor
	// annotations are asked for. Never set for a tools/call.
	Read    bool
	Replays int // replays already made for this invocation, counted from the journal
	Budget  int // replays allowed; 0 means MaxReplays, negative allows none
}

// Decision is a verdict with its reason.
type Decision struct {
	Verdict Verdict
	Reason  Reason
}

// Decide applies the replay rule (docs/replay.md, "The replay rule").
//
// A class other than ClassLost is NotApplicable: ReasonNotDelivered for
// ClassNotDelivered (the caller may send it as a first delivery), otherwise
// ReasonNotConnectionLoss. For ClassLost the checks run in this order, and
// the first that fails gives OutcomeUnknown with its reason: server trust,
// workspace trust, annotations present, Safe, then the budget (Replays >=
// budget). If all pass the verdict is Replay with Safe's reason.
//
// A read (Input.Read: a resources/read or a prompts/get) changed nothing
// that sending it again could repeat: for ClassLost only the budget is
// checked, and the verdict is Replay with ReasonReadRequest, whatever
// trust and annotations say. The budget still bounds it, so that a server
// that breaks the connection on every read is not read from forever.
func Decide(in Input) Decision {
	switch in.Class {
	case ClassLost:
	case ClassNotDelivered:
		return Decision{NotApplicable, ReasonNotDelivered}
	default:
		return Decision{NotApplicable, ReasonNotConnectionLoss}
	}
	budget := in.Budget
	if budget == 0 {
		budget = MaxReplays
	}
	if in.Read {
		if in.Replays >= budget {
			return Decision{OutcomeUnknown, ReasonBudgetSpent}
		}
		return Decision{Replay, ReasonReadRequest}
	}
	if !in.ServerTrusted {
		return Decision{OutcomeUnknown, ReasonServerNotTrusted}
	}
	if !in.WorkspaceTrusted {
		return Decision{OutcomeUnknown, ReasonWorkspaceNotTrusted}
	}
	safe, reason := Safe(in.Annotations)
	if !safe {
		return Decision{OutcomeUnknown, reason}
	}
	if in.Replays >= budget {
		return Decision{OutcomeUnknown, ReasonBudgetSpent}
	}
	return Decision{Replay, reason}
}

// Safe reports the annotation-only verdict, trust assumed, with its reason:
// exactly docs/replay-truth-table.tsv. nil annotations are not safe
// (ReasonNoAnnotations). A tool is safe if it declares idempotentHint: true,
// or readOnlyHint: true without destructiveHint: true or idempotentHint:
// false; a contradictory read-only declaration is never safe, even with
// idempotentHint: true. openWorldHint plays no part.
func Safe(a *Annotations) (bool, Reason) {
	switch {
	case a == nil:
		return false, ReasonNoAnnotations
	case a.ReadOnly == True && (a.Destructive == True || a.Idempotent == False):
		return false, ReasonContradictoryReadOnly
	case a.Idempotent == True:
		return true, ReasonDeclaredIdempotent
	case a.ReadOnly == True:
		return true, ReasonDeclaredReadOnly
	}
	return false, ReasonNotDeclared
}

// Both combines the send-time decision with the decision on the
// re-discovered tool (trust read afresh). It is Replay only if both are;
// then it returns fresh, the view the replay acts on. Otherwise it returns
// the first decision that is not Replay: sendTime if it is not, else fresh.
func Both(sendTime, fresh Decision) Decision {
	if sendTime.Verdict != Replay {
		return sendTime
	}
	return fresh
}

// View is one view of a tool, as the replay rule judges it: the two trust
// gates and the tool's annotations exactly as they came over the wire —
// or of a read (a resources/read or a prompts/get), which needs neither.
type View struct {
	ServerTrusted    bool
	WorkspaceTrusted bool
	// Annotations are the raw annotations object; nil when the tool sent
	// none.
	Annotations json.RawMessage
	// Missing: the tool is not listed (any more).
	Missing bool
	// Read: the request only reads (Input.Read); trust, annotations and
	// Missing are then not looked at.
	Read bool
}

// Judge applies the replay rule to one view of a tool whose call may have
// run (ClassLost), with the replays already made. It is the one function
// that turns trust and wire annotations into a verdict: the engine judges
// every send-time snapshot and every fresh view with it, and `mcpflow
// servers tools` shows it. A missing tool is ReasonToolMissing; annotations
// that do not parse declare nothing: once both trust gates pass, they are
// ReasonMalformedAnnotations. A read is Decide's: Replay within the budget.
func Judge(v View, replays int) Decision {
	if v.Read {
		return Decide(Input{Class: ClassLost, Read: true, Replays: replays})
	}
	if v.Missing {
		return Decision{OutcomeUnknown, ReasonToolMissing}
	}
	ann, err := ParseAnnotations(v.Annotations)
	d := Decide(Input{Class: ClassLost, ServerTrusted: v.ServerTrusted, WorkspaceTrusted: v.WorkspaceTrusted, Annotations: ann, Replays: replays})
	if err != nil && d.Reason == ReasonNoAnnotations {
		return Decision{OutcomeUnknown, ReasonMalformedAnnotations}
	}
	return d
}

// JudgeBoth judges the send-time snapshot and the view now (Judge on each)
// and combines them with Both: Replay only when both views are safe.
func JudgeBoth(sendTime, now View, replays int) Decision {
	return Both(Judge(sendTime, replays), Judge(now, replays))
}

// Declared is the verdict on a tool's wire annotations alone, as if both
// trust gates passed and no replay had been made: whether the tool declares
// itself safe to replay, and why.
func Declared(annotations json.RawMessage) (bool, Reason) {
	d := Judge(View{ServerTrusted: true, WorkspaceTrusted: true, Annotations: annotations}, 0)
	return d.Verdict == Replay, d.Reason
}
