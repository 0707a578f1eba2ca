package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/journal"
)

func newRunsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List and inspect runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("missing subcommand: try 'mcpflow runs list' or 'mcpflow runs show RUN_ID'")
		},
	}
	cmd.AddCommand(newRunsListCommand(g), newRunsShowCommand(g))
	return cmd
}

func newRunsListCommand(g *globals) *cobra.Command {
	var status string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := journal.RunFilter{Limit: limit}
			if status != "" {
				s, err := journal.ParseRunStatus(status)
				if err != nil {
					return usageError("--status: %v", err)
				}
				f.Status = s
			}
			j, err := g.readJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			runs, err := j.Runs(f)
			if err != nil {
				return err
			}
			views := make([]runObject, len(runs))
			for i := range runs {
				invs, err := j.RunInvocations(runs[i].ID)
				if err != nil {
					return err
				}
				views[i] = runView(&runs[i], invs)
			}
			out := cmd.OutOrStdout()
			switch g.output {
			case "json":
				return writeJSON(out, views)
			case "jsonl":
				return writeJSONL(out, views)
			}
			if len(runs) == 0 {
				fmt.Fprintln(out, "no runs match")
				return nil
			}
			t := newTable(out, "ID", "WORKFLOW", "STATUS", "STEPS", "STARTED", "DURATION")
			now := time.Now()
			for i, r := range runs {
				t.row(r.ID.Short(), r.Workflow, r.Status.String(), fmt.Sprint(len(views[i].Steps)), ago(now, r.StartedAt), duration(r))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only runs in this status: running, succeeded, failed, blocked, cancelled")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many (0: all)")
	return cmd
}

func duration(r journal.Run) string {
	if r.FinishedAt == nil {
		return "-"
	}
	return round(r.FinishedAt.Sub(r.StartedAt)).String()
}

func newRunsShowCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show a run: its steps, states, timings, attempts and the audit trail of resolutions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := g.readJournal()
			if err != nil {
				return err
			}
			defer j.Close()
			id, err := j.FindRun(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			run, err := j.Run(id)
			if err != nil {
				return err
			}
			invs, err := j.RunInvocations(id)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output != "table" {
				return g.writeObject(out, runView(run, invs))
			}
			return showRun(out, run, invs)
		},
	}
}

func showRun(w io.Writer, run *journal.Run, invs []journal.Invocation) error {
	fmt.Fprintf(w, "Run:       %s\nWorkflow:  %s (%s)\nStatus:    %s\nStarted:   %s\n", run.ID, run.Workflow, run.Source, run.Status, run.StartedAt.Local().Format(time.RFC3339))
	if run.FinishedAt != nil {
		fmt.Fprintf(w, "Finished:  %s (%s)\n", run.FinishedAt.Local().Format(time.RFC3339), duration(*run))
	}
	fmt.Fprintf(w, "Workspace: %s\nDigest:    %s\n", run.Workspace, run.Digest)
	if run.Error != nil {
		fmt.Fprintf(w, "Error:     %s\n", run.Error.Error())
	}
	fmt.Fprintln(w)
	if len(invs) == 0 {
		fmt.Fprintln(w, "No steps ran.")
		return nil
	}
	t := newTable(w, "STEP", "INVOCATION", "TOOL", "STATE", "ATTEMPTS", "DURATION", "ERROR")
	for _, inv := range invs {
		errText := ""
		if inv.Error != nil {
			errText = inv.Error.Code
		}
		t.row(stepName(&inv), inv.ID.Short(), inv.Server+"/"+inv.Tool, inv.State.String(), attemptsText(&inv), invDuration(&inv), errText)
	}
	if err := t.flush(); err != nil {
		return err
	}
	var trail []string
	for _, inv := range invs {
		for _, res := range inv.Resolutions {
			trail = append(trail, fmt.Sprintf("  %s  %s resolved %s (%s) as %s: %s", res.At.Local().Format(time.RFC3339), res.By, inv.ID.Short(), inv.Step, res.As, res.Why))
		}
	}
	if len(trail) > 0 {
		fmt.Fprintln(w, "\nResolutions:")
		for _, l := range trail {
			fmt.Fprintln(w, l)
		}
	}
	return nil
}

func attemptsText(inv *journal.Invocation) string {
	n := len(inv.Attempts)
	if r := inv.Replays(); r > 0 {
		return fmt.Sprintf("%d (%d replayed)", n, r)
	}
	return fmt.Sprint(n)
}

func invDuration(inv *journal.Invocation) string {
	last := inv.LastAttempt()
	if last == nil || last.EndedAt == nil {
		return "-"
	}
	return round(last.EndedAt.Sub(inv.Attempts[0].SentAt)).String()
}
