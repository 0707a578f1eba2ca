package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

func newJournalCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "journal",
		Short: "Inspect the invocation journal",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("missing subcommand: try 'mcpflow journal list'")
		},
	}
	cmd.AddCommand(
		newJournalListCommand(g),
		newJournalShowCommand(g),
		newJournalResolveCommand(g),
		newJournalExportCommand(g),
		newJournalCheckCommand(g),
		newJournalPruneCommand(g),
		newJournalCompactCommand(g),
	)
	return cmd
}

type journalListOptions struct {
	run, state, server, tool, since string
	limit                           int
	payload                         bool
}

func (o *journalListOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.run, "run", "", "only this run (id or unique prefix)")
	f.StringVar(&o.state, "state", "", "only this state: intent, completed, failed, outcome_unknown, aborted, timed_out, skipped, retry_approved")
	f.StringVar(&o.server, "server", "", "only this server")
	f.StringVar(&o.tool, "tool", "", "only this tool")
	f.StringVar(&o.since, "since", "", "only invocations created since: a duration (90m, 24h) or a date (2026-12-01, RFC 3339)")
	f.IntVar(&o.limit, "limit", 50, "at most this many (0: all)")
	f.BoolVar(&o.payload, "payload", false, "include arguments and results (JSON output)")
}

func newJournalListCommand(g *globals) *cobra.Command {
	o := &journalListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List invocations, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := g.readJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			f := journal.Filter{Server: o.server, Tool: o.tool, Limit: o.limit}
			if o.run != "" {
				if f.Run, err = j.FindRun(o.run); err != nil {
					return usageError("--run: %v", err)
				}
			}
			if o.state != "" {
				if f.State, err = journal.ParseState(o.state); err != nil {
					return usageError("--state: %v", err)
				}
			}
			if o.since != "" {
				if f.Since, err = parseSince(o.since, time.Now()); err != nil {
					return usageError("--since: %v", err)
				}
			}
			invs, err := j.Invocations(f)
			if err != nil {
				return err
			}
			views := make([]invocationView, len(invs))
			for i := range invs {
				views[i] = invView(&invs[i], o.payload)
			}
			out := cmd.OutOrStdout()
			switch g.output {
			case "json":
				return writeJSON(out, views)
			case "jsonl":
				return writeJSONL(out, views)
			}
			if len(invs) == 0 {
				fmt.Fprintln(out, "no invocations match")
				return nil
			}
			t := newTable(out, "ID", "RUN", "STEP", "SERVER", "TOOL", "STATE", "ATTEMPTS", "CREATED")
			now := time.Now()
			for _, inv := range invs {
				t.row(inv.ID.Short(), inv.RunID.Short(), stepName(&inv), inv.Server, inv.Tool, inv.State.String(), fmt.Sprint(len(inv.Attempts)), ago(now, inv.CreatedAt))
			}
			return t.flush()
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func stepName(inv *journal.Invocation) string {
	if inv.Item >= 0 {
		return fmt.Sprintf("%s[%d]", inv.Step, inv.Item)
	}
	return inv.Step
}

// parseSince accepts a duration back from now or an absolute date/time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration such as 24h or a date such as 2026-12-01", s)
}

func newJournalShowCommand(g *globals) *cobra.Command {
	var payload bool
	cmd := &cobra.Command{
		Use:   "show INVOCATION_ID",
		Short: "Show one invocation: attempts, decisions, resolutions (arguments and result with --payload)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := g.readJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			id, err := j.FindInvocation(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			inv, err := j.Invocation(id)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output != "table" {
				return g.writeObject(out, invDetail(inv, payload))
			}
			return showInvocation(out, inv, payload)
		},
	}
	cmd.Flags().BoolVar(&payload, "payload", false, "include the arguments and the result")
	return cmd
}

// invocationDetail is the JSON shape of journal show.
type invocationDetail struct {
	invocationView
	Annotations     json.RawMessage      `json:"annotations"`
	Trust           journal.Trust        `json:"trust"`
	ArgumentsDigest string               `json:"arguments_digest"`
	AttemptLog      []journal.Attempt    `json:"attempt_log"`
	Decisions       []journal.Decision   `json:"decisions"`
	Resolutions     []journal.Resolution `json:"resolutions"`
}

func invDetail(inv *journal.Invocation, payload bool) invocationDetail {
	d := invocationDetail{
		invocationView: invView(inv, payload), Annotations: inv.Annotations, Trust: inv.Trust,
		ArgumentsDigest: inv.ArgumentsDigest, AttemptLog: inv.Attempts, Decisions: inv.Decisions, Resolutions: inv.Resolutions,
	}
	if d.Annotations == nil {
		d.Annotations = json.RawMessage("null")
	}
	if d.AttemptLog == nil {
		d.AttemptLog = []journal.Attempt{}
	}
	if d.Decisions == nil {
		d.Decisions = []journal.Decision{}
	}
	if d.Resolutions == nil {
		d.Resolutions = []journal.Resolution{}
	}
	return d
}

func showInvocation(w io.Writer, inv *journal.Invocation, payload bool) error {
	ann := "none declared"
	if inv.Annotations != nil {
		ann = string(inv.Annotations)
	}
	trust := fmt.Sprintf("server %v, workspace %v", inv.Trust.Server, inv.Trust.Workspace)
	if inv.Trust.WorkspaceSource != "" {
		trust += " (" + inv.Trust.WorkspaceSource + ")"
	}
	fmt.Fprintf(w, "Invocation:   %s\nRun:          %s\nStep:         %s\nTool:         %s/%s\nState:        %s\nIdempotency:  %s\nAnnotations:  %s\nTrust:        %s\nArguments:    %s\n",
		inv.ID, inv.RunID, stepName(inv), inv.Server, inv.Tool, inv.State, inv.IdempotencyKey, ann, trust, inv.ArgumentsDigest)
	if inv.Error != nil {
		fmt.Fprintf(w, "Error:        %s\n", inv.Error.Error())
	}
	fmt.Fprintln(w, "\nAttempts:")
	for _, a := range inv.Attempts {
		line := fmt.Sprintf("  %d  sent %s", a.N, a.SentAt.Local().Format("2006-01-02 15:04:05.000"))
		if a.Replay {
			line += "  (replay)"
		}
		if a.EndedAt != nil {
			line += "  ended after " + round(a.EndedAt.Sub(a.SentAt)).String()
		} else {
			line += "  no outcome recorded"
		}
		if a.Failure != "" {
			line += "  failure: " + a.Failure
		}
		fmt.Fprintln(w, line)
	}
	if len(inv.Decisions) > 0 {
		fmt.Fprintln(w, "\nDecisions:")
		for _, d := range inv.Decisions {
			fmt.Fprintf(w, "  attempt %d  %s  %s (%s view)\n", d.Attempt, d.Verdict, d.Reason, d.View)
		}
	}
	if len(inv.Resolutions) > 0 {
		fmt.Fprintln(w, "\nResolutions:")
		for _, r := range inv.Resolutions {
			fmt.Fprintf(w, "  %s  %s: %s → %s: %s\n", r.At.Local().Format(time.RFC3339), r.By, r.From, r.As, r.Why)
		}
	}
	if payload {
		fmt.Fprintf(w, "\nArguments:\n  %s\n", inv.Arguments)
		if inv.Result != nil {
			b, _ := json.Marshal(inv.Result)
			fmt.Fprintf(w, "Result:\n  %s\n", b)
		}
	}
	return nil
}

type resolveOptions struct {
	as, result, reason string
}

func newJournalResolveCommand(g *globals) *cobra.Command {
	o := &resolveOptions{}
	cmd := &cobra.Command{
		Use:   "resolve INVOCATION_ID --as completed|failed|retry",
		Short: "Record an operator's decision on an invocation whose outcome is unknown",
		Long: `Record what happened to a call mcpflow could not know the outcome of
(outcome_unknown, aborted or timed_out), after you checked the real system:

  --as completed --result FILE   it ran; FILE holds its result as JSON
                                 ({"content": [...], "structuredContent": {...}}; - for stdin)
  --as failed --reason TEXT      it did not run, or its effect was undone; the run fails
  --as retry --reason TEXT       send it again on the next resume

Who (the OS user), when and why are journaled. Then run 'mcpflow resume RUN_ID'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var as journal.State
			switch o.as {
			case "completed":
				as = journal.StateCompleted
			case "failed":
				as = journal.StateFailed
			case "retry":
				as = journal.StateRetryApproved
			default:
				return usageError("--as %q: want completed, failed or retry", o.as)
			}
			if as != journal.StateCompleted && o.reason == "" {
				return usageError("--as %s needs --reason TEXT: say why, for the audit trail", o.as)
			}
			if o.result != "" && as != journal.StateCompleted {
				return usageError("--result goes with --as completed")
			}
			var result *journal.Result
			if as == journal.StateCompleted {
				if o.result == "" {
					return usageError("--as completed needs --result FILE with the call's result as JSON (- for stdin)")
				}
				r, err := readResult(cmd.InOrStdin(), o.result)
				if err != nil {
					return usageError("--result: %v", err)
				}
				result = r
				if o.reason == "" {
					o.reason = "operator supplied the result"
				}
			}
			j, err := g.openJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			id, err := j.FindInvocation(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			err = j.Resolve(id, journal.Resolution{By: osUser(), As: as, Why: o.reason}, result)
			if errors.Is(err, journal.ErrTransition) {
				return usageError("%v", err)
			}
			if err != nil {
				return err
			}
			inv, err := j.Invocation(id)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.writeObject(cmd.OutOrStdout(), invDetail(inv, false))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "invocation %s resolved as %s\nnext: mcpflow resume %s\n", inv.ID.Short(), inv.State, inv.RunID.Short())
			return nil
		},
	}
	cmd.Flags().StringVar(&o.as, "as", "", "completed, failed or retry")
	cmd.Flags().StringVar(&o.result, "result", "", "with --as completed: a JSON file holding the result (- for stdin)")
	cmd.Flags().StringVar(&o.reason, "reason", "", "why: kept in the audit trail")
	return cmd
}

func readResult(stdin io.Reader, path string) (*journal.Result, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	var in struct {
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("%s: want {\"content\": [...], \"structuredContent\": {...}}: %v", path, err)
	}
	return &journal.Result{Content: in.Content, StructuredContent: in.StructuredContent, IsError: in.IsError}, nil
}

func osUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}

func newJournalExportCommand(g *globals) *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write every invocation record as JSON Lines to stdout, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var t time.Time
			if since != "" {
				var err error
				if t, err = parseSince(since, time.Now()); err != nil {
					return usageError("--since: %v", err)
				}
			}
			j, err := g.readJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			w := bufio.NewWriter(cmd.OutOrStdout())
			if err := j.Export(w, t); err != nil {
				return err
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only invocations created since: a duration (24h) or a date")
	return cmd
}

func newJournalCheckCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Verify the journal: the file, its indexes and every invariant",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := g.readJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			probs, err := j.Check()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output != "table" {
				list := make([]string, len(probs))
				for i, p := range probs {
					list[i] = p.String()
				}
				if err := g.writeObject(out, map[string]any{"ok": len(probs) == 0, "problems": list}); err != nil {
					return err
				}
			} else if len(probs) == 0 {
				fmt.Fprintf(out, "journal %s: OK\n", g.journalPath)
			} else {
				for _, p := range probs {
					fmt.Fprintln(out, p.String())
				}
			}
			if len(probs) > 0 {
				return &exitError{code: exitJournal, err: fmt.Errorf("journal check found %d problem(s)", len(probs))}
			}
			return nil
		},
	}
}
