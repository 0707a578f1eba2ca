package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
)

type journalShowOptions struct {
	ioStreams
	g          *globals
	invocation string
	payload    bool
}

func newJournalShowCommand(g *globals, runF func(context.Context, *journalShowOptions) error) *cobra.Command {
	o := &journalShowOptions{g: g}
	cmd := &cobra.Command{
		Use:   "show INVOCATION_ID",
		Short: "Show one invocation: attempts, decisions, resolutions (arguments and result with --payload)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.invocation = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runJournalShow(o)
		},
	}
	cmd.Flags().BoolVar(&o.payload, "payload", false, "include the arguments and the result")
	return cmd
}

func runJournalShow(o *journalShowOptions) error {
	svc, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	defer done()
	inv, err := svc.Invocation(o.invocation)
	if err != nil {
		return err
	}
	return o.g.printer(o.Out).print(api.InvocationDetailOf(inv, o.payload), func(w io.Writer) error {
		return showInvocation(w, o.g.times, inv, o.payload)
	})
}

func showInvocation(w io.Writer, tf timeFormat, inv *journal.Invocation, payload bool) error {
	trust := fmt.Sprintf("server %v, workspace %v", inv.Trust.Server, inv.Trust.Workspace)
	if inv.Trust.WorkspaceSource != "" {
		trust += " (" + inv.Trust.WorkspaceSource + ")"
	}
	f := fields{w: w, width: len("Annotations:") + 1}
	f.add("Invocation", inv.ID.String())
	f.add("Run", inv.RunID.String())
	f.add("Step", stepName(inv))
	if inv.Method.Reads() {
		f.add("Request", api.TargetOf(inv))
	} else {
		f.add("Tool", api.TargetOf(inv))
	}
	f.add("State", inv.State.String())
	f.add("Idempotency", inv.IdempotencyKey)
	if inv.Method.Reads() {
		f.add("Annotations", "none needed: a "+inv.Method.String()+" changes nothing, and is always safe to repeat")
	} else {
		f.add("Annotations", annotationsText(inv.Annotations))
	}
	f.add("Trust", trust)
	f.add("Arguments", inv.ArgumentsDigest)
	if inv.Error != nil {
		f.add("Error", inv.Error.Error())
	}
	fmt.Fprintln(w, "\nAttempts:")
	for i, a := range inv.Attempts {
		line := fmt.Sprintf("  %d  sent %s", a.N, tf.at(a.SentAt))
		if k := inv.Sent(i); k != journal.KindFirst {
			line += "  (" + api.KindText(k) + ")"
		}
		switch {
		case a.Interrupted:
			// Its end is when a resume found it, not when it ended.
			line += "  interrupted: mcpflow stopped while it was in flight (found by a resume at " + tf.at(*a.EndedAt) + ")"
		case a.EndedAt != nil:
			line += "  ended after " + round(a.EndedAt.Sub(a.SentAt)).String()
		default:
			line += "  no outcome recorded"
		}
		if a.Failure != "" {
			line += "  failure: " + string(a.Failure)
		}
		fmt.Fprintln(w, line)
		if a.Detail != "" {
			fields{w: w, indent: "       "}.add("detail", a.Detail)
		}
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
			fmt.Fprintf(w, "  %s  %s: %s → %s: %s\n", tf.at(r.At), r.By, r.From, r.As, r.Why)
		}
	}
	if payload {
		fmt.Fprintln(w, "\nArguments:")
		block(w, "  ", jsonText(inv.Arguments))
		if inv.Result != nil {
			showResult(w, inv.Method, inv.Result)
		}
	}
	return nil
}

// showResult prints a result as journal show does: its content rendered
// (contentLines), its structured content as JSON, and whether it was a
// tool error; a read's or a prompt's result rendered (readLines). -o json
// shows the result exactly as journaled.
func showResult(w io.Writer, m journal.Method, r *journal.Result) {
	head := "Result:"
	if r.IsError {
		head = "Result (tool error):"
	}
	fmt.Fprintln(w, head)
	if m.Reads() {
		for _, l := range readLines(m, r.StructuredContent) {
			fmt.Fprintln(w, strings.TrimRight("  "+l, " "))
		}
		return
	}
	for _, l := range contentLines(r.Content) {
		fmt.Fprintln(w, strings.TrimRight("  "+l, " "))
	}
	if !api.IsNull(r.StructuredContent) {
		fmt.Fprintln(w, "Structured content:")
		block(w, "  ", jsonText(r.StructuredContent))
	}
}
