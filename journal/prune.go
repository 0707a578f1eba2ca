package journal

import (
	"fmt"
	"time"
)

// PruneReport says what Prune removed (or, in a dry run, would remove).
type PruneReport struct {
	Runs, Invocations int
	// Kept lists the runs old enough to go that were kept, with the reason.
	Kept []KeptRun
}

// KeptRun is a run Prune did not remove.
type KeptRun struct {
	ID     ID
	Reason string
}

// PruneVerdict says whether Prune removes r (gone), keeps it for a reason
// it reports (keep), or leaves it silently (too young). first finds the
// run's first invocation whose state matches.
func PruneVerdict(r *Run, before time.Time, first func(match func(State) bool) (*Invocation, error)) (keep string, gone bool, err error) {
	switch {
	case r.Status == RunRunning:
		if r.StartedAt.Before(before) {
			return "running", false, nil
		}
		return "", false, nil
	case r.FinishedAt == nil || !r.FinishedAt.Before(before):
		return "", false, nil
	}
	// Keep a run that waits for an operator's approval.
	if p := r.PendingApprovals(); len(p) > 0 {
		return fmt.Sprintf("step %s waits for approval", p[0].Step), false, nil
	}
	// Keep what may have had an effect nobody has accounted for: a call
	// in flight, unknown, approved for a re-send, or aborted or timed out
	// and never resolved.
	inv, err := first(func(s State) bool { return s.Unsettled() || s.waitsForResolution() })
	if err != nil {
		return "", false, err
	}
	if inv != nil {
		return fmt.Sprintf("invocation %s is %s", inv.ID, inv.State), false, nil
	}
	return "", true, nil
}
