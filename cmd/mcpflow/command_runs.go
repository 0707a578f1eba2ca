package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

func newRunsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, inspect, watch and cancel runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("missing subcommand: try 'mcpflow runs list' or 'mcpflow runs show RUN_ID'")
		},
	}
	cmd.AddCommand(newRunsListCommand(g, nil), newRunsShowCommand(g, nil), newRunsWatchCommand(g, nil), newRunsCancelCommand(g, nil))
	return cmd
}

// duration is a run's DURATION in lists: its wall time, with its work
// time when it waited (for an approval, an operator, a resume); "-" while
// it goes.
func duration(r *journal.Run, invs []journal.Invocation) string {
	if r.FinishedAt == nil {
		return "-"
	}
	t := api.TimingOf(r, invs, time.Now())
	d := round(t.Wall).String()
	if t.Waited() >= api.MinIdle {
		d += " (work " + round(t.Work).String() + ")"
	}
	return d
}

func showRun(w io.Writer, tf timeFormat, run *journal.Run, invs []journal.Invocation) error {
	now := time.Now()
	timing := api.TimingOf(run, invs, now)
	f := fields{w: w, width: len("Workspace:")}
	f.add("Run", run.ID.String())
	f.add("Workflow", fmt.Sprintf("%s (%s)", run.Workflow, run.Source))
	f.add("Status", run.Status.String())
	f.add("Started", tf.at(run.StartedAt))
	if run.FinishedAt != nil {
		f.add("Finished", fmt.Sprintf("%s (%s)", tf.at(*run.FinishedAt), round(timing.Wall)))
	}
	printTiming(w, run, timing)
	f.add("Workspace", run.Workspace)
	f.add("Digest", run.Digest)
	if run.Error != nil {
		f.add("Error", run.Error.Error())
	}
	printValues(w, "Inputs:", run.Inputs)
	printValues(w, "Outputs:", run.Outputs)
	fmt.Fprintln(w)
	if len(invs) == 0 {
		fmt.Fprintln(w, "No steps ran.")
	} else {
		t := newTable(w, "STEP", "INVOCATION", "TOOL", "STATE", "ATTEMPTS", "DURATION", "ERROR")
		for _, inv := range invs {
			t.row(stepName(&inv), inv.ID.Short(), api.TargetOf(&inv), stateText(&inv), attemptsText(&inv), callTime(&inv, run.Status == journal.RunRunning, now), errorText(&inv))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	var trail []string
	for _, inv := range invs {
		for _, res := range inv.Resolutions {
			trail = append(trail, fmt.Sprintf("  %s  %s resolved %s (%s) as %s: %s", tf.at(res.At), res.By, inv.ID.Short(), inv.Step, res.As, res.Why))
		}
	}
	if len(trail) > 0 {
		fmt.Fprintln(w, "\nResolutions:")
		for _, l := range trail {
			fmt.Fprintln(w, l)
		}
	}
	printQuestions(w, tf, run, invs)
	if len(run.Approvals) > 0 {
		fmt.Fprintln(w, "\nApprovals:")
		for _, a := range run.Approvals {
			fmt.Fprintln(w, approvalLine(tf, run.ID, a))
		}
	}
	return nil
}

// approvalLine is one approval gate in runs show: who decided what, when
// and why, or what it waits for and the commands that decide it.
func approvalLine(tf timeFormat, run journal.ID, a journal.Approval) string {
	if a.State == journal.ApprovalPending {
		return fmt.Sprintf("  %s  step %s waits for approval%s (mcpflow approve %s %s, or reject)", tf.at(a.RequestedAt), a.Step, quoted(a.Message), run.Short(), a.Step)
	}
	at := a.RequestedAt
	if a.At != nil {
		at = *a.At
	}
	line := fmt.Sprintf("  %s  %s %s step %s", tf.at(at), a.By, a.State, a.Step)
	if a.InAdvance {
		line += " in advance"
	}
	if a.Reason != "" {
		line += ": " + a.Reason
	}
	return line
}

// waitingFor says what a blocked run waits for: the approval of a step,
// the resolution of the invocations whose outcome is unknown, an answer, or
// a login to a server (its error says which: runs show).
func waitingFor(run *journal.Run, invs []journal.Invocation) string {
	if run.Status != journal.RunBlocked {
		return ""
	}
	if p := run.PendingApprovals(); len(p) > 0 {
		return "approval of step " + p[0].Step
	}
	rep := service.Report{Run: run, Invocations: invs}
	var steps, asking []string
	for _, inv := range rep.Waiting() {
		steps = append(steps, stepName(&inv))
	}
	for _, inv := range rep.WaitingInput() {
		asking = append(asking, stepName(&inv))
	}
	switch {
	case len(steps) > 0:
		return "resolution of " + strings.Join(steps, ", ")
	case len(asking) > 0:
		return "answer to step " + strings.Join(asking, ", ")
	case run.Error != nil && run.Error.Code == engine.CodeLoginRequired:
		return "a server login"
	}
	return ""
}

// attemptsText is the ATTEMPTS column: how many, and why those after the
// first were sent ("3 (1 retry, 1 operator retry)").
func attemptsText(inv *journal.Invocation) string { return api.AttemptsText(inv) }

// callTime is the DURATION of a call: the time of its attempts, each sent
// to ended (not the time between them); an attempt mcpflow stopped during
// is said interrupted, its time unknown, never counted up to the resume
// that found it.
func callTime(inv *journal.Invocation, live bool, now time.Time) string {
	return api.CallTimingOf(inv, live, now).Text(func(d time.Duration) string { return round(d).String() }, "-")
}

// printTiming prints a run's time: its work (a call in flight) and wall
// time, and the gaps in which it waited, each with what for (idle gaps,
// the engine's own time and servers starting, are in neither figure).
func printTiming(w io.Writer, run *journal.Run, t api.Timing) {
	sofar := ""
	if run.Status == journal.RunRunning {
		sofar = " so far"
	}
	line := fmt.Sprintf("Time:      work %s%s, wall %s%s", round(t.Work), sofar, round(t.Wall), sofar)
	waited := t.Waited()
	if waited > 0 {
		line += fmt.Sprintf(", waited %s", round(waited))
	}
	fmt.Fprintln(w, line)
	if waited == 0 {
		return
	}
	fmt.Fprintln(w, "Waited:")
	for _, g := range t.Gaps {
		if g.Kind != api.GapIdle {
			fmt.Fprintf(w, "  +%-9s %-9s %s: %s\n", round(g.From.Sub(t.Start)), round(g.Duration()), g.Kind, g.Text())
		}
	}
}
