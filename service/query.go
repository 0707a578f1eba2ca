package service

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
)

// RunQuery selects runs, newest first.
type RunQuery struct {
	// Status, when set, is a run status name (running, succeeded, …).
	Status string
	// Workflow keeps the runs of the workflow of this name.
	Workflow string
	// Since keeps the runs started at or after it; Until those started
	// at or before it.
	Since, Until time.Time
	// Server keeps the runs with a call to this server; Tool, with Server
	// or alone, those with a call of this tool. Neither is indexed: the
	// runs are read until Limit of them match.
	Server, Tool string
	// Cursor is the id of the last run of the previous page: only older
	// runs are listed.
	Cursor string
	// Limit caps the runs returned (0: all).
	Limit int
}

// byCall reports whether q keeps runs by the calls they made.
func (q RunQuery) byCall() bool { return q.Server != "" || q.Tool != "" }

// calls reports whether invs hold a call q keeps.
func (q RunQuery) calls(invs []journal.Invocation) bool {
	for _, inv := range invs {
		if (q.Server == "" || inv.Server == q.Server) && (q.Tool == "" || inv.Tool == q.Tool) {
			return true
		}
	}
	return false
}

// scanPage is how many runs a query by call reads at a time.
const scanPage = 200

// RunSummary is a run with its invocations.
type RunSummary struct {
	Run         journal.Run
	Invocations []journal.Invocation
}

// Runs lists runs with their invocations.
func (s *Service) Runs(q RunQuery) ([]RunSummary, error) {
	f, err := s.runFilter(q)
	if err != nil {
		return nil, err
	}
	out := []RunSummary{}
	err = s.eachRun(q, f, func(run *journal.Run, invs []journal.Invocation) bool {
		rep := (&Report{Run: run, Invocations: invs}).shown()
		out = append(out, RunSummary{Run: *rep.Run, Invocations: rep.Invocations})
		return q.Limit == 0 || len(out) < q.Limit
	})
	return out, err
}

// eachRun hands fn the runs f selects that q keeps, newest first, with
// their invocations, until fn returns false. A query by call reads the
// runs a page at a time, keeping those with a matching call.
func (s *Service) eachRun(q RunQuery, f journal.RunFilter, fn func(*journal.Run, []journal.Invocation) bool) error {
	if q.byCall() && f.Limit > 0 {
		f.Limit = max(f.Limit, scanPage)
	}
	for {
		runs, err := s.j.Runs(f)
		if err != nil {
			return err
		}
		for i := range runs {
			if !q.Until.IsZero() && runs[i].StartedAt.After(q.Until) {
				continue
			}
			invs, err := s.j.RunInvocations(runs[i].ID)
			if err != nil {
				return err
			}
			if q.byCall() && !q.calls(invs) {
				continue
			}
			if !fn(&runs[i], invs) {
				return nil
			}
		}
		if !q.byCall() || f.Limit == 0 || len(runs) < f.Limit {
			return nil
		}
		f.Before = runs[len(runs)-1].ID
	}
}

// Count is how many items a query matches: N, or at least N when More.
type Count struct {
	N    int
	More bool
}

// countMost bounds a count, so that telling a cut list's total never
// costs more than reading this many index entries.
const countMost = 10_000

// CountRuns counts the runs q matches (its Limit ignored). A query by call
// reads the runs: it stops at countMost of them.
func (s *Service) CountRuns(q RunQuery) (Count, error) {
	f, err := s.runFilter(q)
	if err != nil {
		return Count{}, err
	}
	if !q.byCall() {
		n, more, err := s.j.CountRuns(f, countMost)
		return Count{n, more}, err
	}
	var c Count
	f.Limit = scanPage
	err = s.eachRun(q, f, func(*journal.Run, []journal.Invocation) bool {
		c.N++
		c.More = c.N >= countMost
		return !c.More
	})
	return c, err
}

func (s *Service) runFilter(q RunQuery) (journal.RunFilter, error) {
	f := journal.RunFilter{Workflow: q.Workflow, Since: q.Since, Limit: q.Limit}
	if !q.Until.IsZero() {
		// Ids are made in time order: the walk starts after Until's
		// millisecond (each run's start is checked too).
		f.Before = idAfter(q.Until)
	}
	if q.Status != "" {
		st, err := ParseRunStatus(q.Status)
		if err != nil {
			return f, err
		}
		f.Status = st
	}
	if err := s.open(); err != nil {
		return f, err
	}
	if q.Cursor != "" {
		id, err := s.j.FindRun(q.Cursor)
		if err != nil {
			return f, invalid("--cursor: %v", err)
		}
		if f.Before.IsZero() || bytes.Compare(id.Bytes(), f.Before.Bytes()) < 0 {
			f.Before = id
		}
	}
	return f, nil
}

// idAfter is the smallest id of the millisecond after t: ids before it
// were made at or before t (ids are UUIDv7s, time-ordered).
func idAfter(t time.Time) journal.ID {
	var id journal.ID
	binary.BigEndian.PutUint64(id[:8], uint64(max(t.UnixMilli()+1, 0))<<16|0x7000)
	return id
}

// ParseRunStatus reads a run status name; a bad one is an invalid request.
func ParseRunStatus(name string) (journal.RunStatus, error) {
	st, err := journal.ParseRunStatus(name)
	if err != nil {
		return 0, invalid("--status: %v", err)
	}
	return st, nil
}

// RunDetail returns one run (by id or unique prefix) with its invocations.
func (s *Service) RunDetail(ref string) (*Report, error) {
	id, err := s.findRun(ref)
	if err != nil {
		return nil, err
	}
	return s.report(id, false)
}

// InvocationQuery selects invocations, newest first.
type InvocationQuery struct {
	// Run is a run id or unique prefix ("" for all runs).
	Run string
	// State is a state name ("" for all).
	State        string
	Server, Tool string
	Since        time.Time
	// Cursor is the id of the last invocation of the previous page: only
	// older invocations are listed.
	Cursor string
	Limit  int
}

// Invocations lists invocations.
func (s *Service) Invocations(q InvocationQuery) ([]journal.Invocation, error) {
	f, err := s.invFilter(q)
	if err != nil {
		return nil, err
	}
	invs, err := s.j.Invocations(f)
	if err != nil {
		return nil, err
	}
	return s.shownInvs(invs)
}

// CountInvocations counts the invocations q matches (its Limit ignored).
func (s *Service) CountInvocations(q InvocationQuery) (Count, error) {
	f, err := s.invFilter(q)
	if err != nil {
		return Count{}, err
	}
	n, more, err := s.j.CountInvocations(f, countMost)
	return Count{n, more}, err
}

func (s *Service) invFilter(q InvocationQuery) (journal.Filter, error) {
	f := journal.Filter{Server: q.Server, Tool: q.Tool, Since: q.Since, Limit: q.Limit}
	switch q.State {
	case "":
	case api.ToolError: // completed, with a tool error
		f.State, f.ToolError = journal.StateCompleted, true
	default:
		st, err := journal.ParseState(q.State)
		if err != nil {
			return f, invalid("--state: unknown invocation state %q (want one of intent, completed, tool_error, failed, outcome_unknown, aborted, timed_out, skipped, retry_approved)", q.State)
		}
		f.State = st
	}
	if err := s.open(); err != nil {
		return f, err
	}
	if q.Run != "" {
		id, err := s.j.FindRun(q.Run)
		if err != nil {
			return f, invalid("--run: %v", err)
		}
		f.Run = id
	}
	if q.Cursor != "" {
		id, err := s.j.FindInvocation(q.Cursor)
		if err != nil {
			return f, invalid("--cursor: %v", err)
		}
		f.Before = id
	}
	return f, nil
}

// shownInvs redacts invocations of any runs for showing.
func (s *Service) shownInvs(invs []journal.Invocation) ([]journal.Invocation, error) {
	secrets := map[journal.ID][]string{}
	for i, inv := range invs {
		if inv.Arguments == nil && inv.Result == nil {
			continue
		}
		sec, ok := secrets[inv.RunID]
		if !ok {
			run, err := s.j.Run(inv.RunID)
			if err != nil {
				return nil, err
			}
			sec = secretsOf(run)
			secrets[inv.RunID] = sec
		}
		invs[i] = shownInv(inv, sec)
	}
	return invs, nil
}

// Invocation returns one invocation by id or unique prefix.
func (s *Service) Invocation(ref string) (*journal.Invocation, error) {
	id, err := s.findInvocation(ref)
	if err != nil {
		return nil, err
	}
	return s.shownInvocation(id)
}

func (s *Service) shownInvocation(id journal.ID) (*journal.Invocation, error) {
	inv, err := s.j.Invocation(id)
	if err != nil {
		return nil, err
	}
	invs, err := s.shownInvs([]journal.Invocation{*inv})
	if err != nil {
		return nil, err
	}
	return &invs[0], nil
}

// ResolveRequest records an operator's decision on an invocation whose
// outcome mcpflow could not know.
type ResolveRequest struct {
	// Invocation is an invocation id or unique prefix.
	Invocation string
	// As is completed, failed or retry_approved.
	As journal.State
	// Result is the call's result, with As completed.
	Result *journal.Result
	// Reason says why, for the audit trail; By is who decided.
	Reason, By string
}

// Resolve journals the resolution (who, when, why) and returns the
// invocation as committed. A resolution its state does not allow is an
// invalid request and writes nothing.
func (s *Service) Resolve(req ResolveRequest) (*journal.Invocation, error) {
	id, err := s.findInvocation(req.Invocation)
	if err != nil {
		return nil, err
	}
	err = s.j.Resolve(id, journal.Resolution{By: req.By, As: req.As, Why: req.Reason}, req.Result)
	if errors.Is(err, journal.ErrTransition) {
		return nil, invalid("%v", err)
	}
	if err != nil {
		return nil, err
	}
	return s.shownInvocation(id)
}

// Export writes every invocation created since since as JSON Lines, oldest
// first; with decrypt, payloads decrypted (the journal's key is needed),
// otherwise as stored.
func (s *Service) Export(w io.Writer, since time.Time, decrypt bool) error {
	if err := s.open(); err != nil {
		return err
	}
	return s.j.Export(w, since, decrypt)
}

// Archive writes the whole journal — every run, then every invocation,
// records as stored — for Import into another journal (see
// journal.Store.Archive).
func (s *Service) Archive(w io.Writer, decrypt bool) error {
	if err := s.open(); err != nil {
		return err
	}
	return s.j.Archive(w, decrypt)
}

// Import writes an archive's records into the journal (see
// journal.Store.Import).
func (s *Service) Import(r io.Reader) (journal.ImportReport, error) {
	if err := s.open(); err != nil {
		return journal.ImportReport{}, err
	}
	return s.j.Import(r)
}

// Check verifies the journal: the file, its indexes and every invariant.
func (s *Service) Check() ([]journal.Problem, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.j.Check()
}

// Prune removes the runs that finished before a time, with their
// invocations, keeping every run with an unsettled invocation; with dryRun
// it only reports.
func (s *Service) Prune(before time.Time, dryRun bool) (journal.PruneReport, error) {
	if err := s.open(); err != nil {
		return journal.PruneReport{}, err
	}
	return s.j.Prune(before, dryRun)
}
