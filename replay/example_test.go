package replay_test

import (
	"encoding/json"
	"fmt"

	"github.com/mcpflow/mcpflow/replay"
)

func ExampleDecide() {
	// A stdio server died while the call was in flight: it may have run
	// (upstream.Classify says so of io.EOF).
	class := replay.ClassLost

	for _, raw := range []string{
		`{"readOnlyHint":true}`,
		// What a go-sdk server sends for a read-only tool: a contradiction.
		`{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":false}`,
		`null`,
	} {
		ann, err := replay.ParseAnnotations(json.RawMessage(raw))
		if err != nil {
			panic(err)
		}
		d := replay.Decide(replay.Input{
			Class:            class,
			ServerTrusted:    true,
			WorkspaceTrusted: true,
			Annotations:      ann,
		})
		fmt.Println(class, d.Verdict, d.Reason)
	}
	fmt.Println(replay.ErrOutcomeUnknown)
	// Output:
	// connection_lost replay declared_read_only
	// connection_lost outcome_unknown contradictory_read_only
	// connection_lost outcome_unknown no_annotations
	// MCPFLOW_OUTCOME_UNKNOWN: the tool call may have completed and must not be retried automatically; an operator must resolve it with `mcpflow journal resolve`
}
