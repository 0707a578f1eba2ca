package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/elicit"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// answerOptions are the options of answer.
type answerOptions struct {
	ioStreams
	g               *globals
	run, step       string
	fields          []string
	decline, cancel bool
	done, approve   bool
	key             string
	item            int
	noContinue      bool
}

func newAnswerCommand(g *globals, runF func(context.Context, *answerOptions) error) *cobra.Command {
	o := &answerOptions{g: g}
	cmd := &cobra.Command{
		Use:   "answer RUN_ID STEP (--field NAME=VALUE... | --done | --approve | --decline | --cancel) [--no-continue]",
		Short: "Answer the question a server asked during a step's call; the run goes on",
		Long: `Answer a question a server asked during a step's call (an MCP elicitation) that
its run waits for, and continue the run: the call is sent again with the answer,
under the same idempotency key — a continuation, not a replay: the tool had not
run. 'mcpflow runs show RUN_ID' shows the question and the fields it asks for.

--field NAME=VALUE gives one field (repeat it), typed as the question's schema
says (true/false, numbers); the answer is checked against the schema before it is
journaled. A URL question (mode url: a person opens the URL and finishes
there) is answered --done once they have, unless the server says so itself
(its completion notice answers it). A server's sampling request, when
mcpflow.yaml's sampling: says approve: true, waits for --approve (mcpflow then
sends it to the provider and journals the reply) or --decline. --decline and
--cancel answer without fields. Who (the OS user) and
when are journaled with the answer, and shown by 'mcpflow runs show'. An answer is
final.

The run goes on in mcpflow server when one serves the journal (this command
follows it there); otherwise here, printed as 'mcpflow resume' prints it.
--no-continue only records the answer: 'mcpflow resume RUN_ID' continues later.

` + exitCodesHelp,
		Example: `  mcpflow answer 01a2375e-c529 pay --field confirm=true --field reference=INV-42
  mcpflow answer 01a2375e-c529 pay --decline`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError("give RUN_ID and STEP, as the blocked run's message names them (blocked runs: mcpflow runs list --status blocked)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.run, o.step = streams(cmd), args[0], args[1]
			n := 0
			for _, set := range []bool{len(o.fields) > 0, o.decline, o.cancel, o.done, o.approve} {
				if set {
					n++
				}
			}
			if n != 1 {
				return usageError("give the answer's fields (--field NAME=VALUE), or --done (a URL question), or --approve (a sampling request), or --decline, or --cancel")
			}
			if !cmd.Flags().Changed("item") {
				o.item = -1
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runAnswer(cmd.Context(), o)
		},
	}
	cmd.Flags().StringArrayVar(&o.fields, "field", nil, "a field of the answer, NAME=VALUE (repeat it)")
	cmd.Flags().BoolVar(&o.done, "done", false, "a URL question: the person finished at the URL")
	cmd.Flags().BoolVar(&o.approve, "approve", false, "a sampling request (sampling: approve: true): send it to the provider")
	cmd.Flags().BoolVar(&o.decline, "decline", false, "decline to answer: the server decides what that means")
	cmd.Flags().BoolVar(&o.cancel, "cancel", false, "cancel: the server decides what that means")
	cmd.Flags().StringVar(&o.key, "request", "", "which question, when the call asked several")
	cmd.Flags().IntVar(&o.item, "item", -1, "which item of a for_each step")
	cmd.Flags().BoolVar(&o.noContinue, "no-continue", false, "only record the answer; 'mcpflow resume' continues the run")
	return cmd
}

// answerResult is the stable JSON shape of answer: the answer as
// journaled (secret fields redacted), and the run as its continuation
// left it.
type answerResult struct {
	RunID        string    `json:"run_id"`
	Step         string    `json:"step"`
	Invocation   string    `json:"invocation"`
	Key          string    `json:"key"`
	Response     any       `json:"response"`
	By           string    `json:"by"`
	At           time.Time `json:"at"`
	Continued    bool      `json:"continued"`
	NotContinued string    `json:"not_continued,omitempty"`
	Run          *api.Run  `json:"run,omitempty"`
}

func runAnswer(ctx context.Context, o *answerOptions) error {
	svc, done, err := continuing(o.g, o.noContinue, "answer", o.Err)
	if err != nil {
		return err
	}
	defer done()
	p := o.g.printer(o.Out)
	cols := runColumns(svc, o.run)
	progress := progressFor(o.g, o.Out, cols)
	defer progress.close()
	action := elicit.Accept
	switch {
	case o.decline:
		action = elicit.Decline
	case o.cancel:
		action = elicit.Cancel
	}
	req := service.AnswerRequest{Run: o.run, Step: o.step, Item: o.item, Key: o.key, Action: action, Fields: o.fields,
		By: osUser(), NoContinue: o.noContinue, Events: progress.event}
	req.Answered = func(rep *service.AnswerReport) {
		if !p.structured() {
			fmt.Fprintf(o.Out, "step %s of run %s answered (%s) by %s\n", o.step, rep.Run.ID.Short(), action, rep.Answer.By)
		}
	}
	rep, err := svc.Answer(ctx, req)
	progress.close()
	if handled, err := followDetached(o.g, o.ioStreams, svc, err, cols); handled {
		return err
	}
	if err != nil {
		return err
	}
	res := answerResult{RunID: rep.Run.ID.String(), Step: o.step, Invocation: rep.Invocation.String(), Key: rep.Answer.Key,
		Response: redactedResponse(rep), By: rep.Answer.By, At: rep.Answer.At, Continued: rep.Continued != nil}
	if rep.NotContinued != nil {
		res.NotContinued = rep.NotContinued.Error()
	}
	if c := rep.Continued; c != nil {
		r := api.RunOf(c.Run, c.Invocations)
		res.Run = &r
	}
	err = p.print(res, func(w io.Writer) error {
		if c := rep.Continued; c != nil {
			printOutputs(w, c.Run.Outputs)
			return nil
		}
		if rep.NotContinued != nil {
			fmt.Fprintf(o.Err, "mcpflow: run %s did not go on: %v\n", rep.Run.ID.Short(), rep.NotContinued)
		}
		switch {
		case rep.Continues && (o.noContinue || rep.NotContinued != nil):
			fmt.Fprintf(w, "next: mcpflow resume %s (the call is sent again with the answer)\n", rep.Run.ID.Short())
		case rep.Continues:
			fmt.Fprintln(w, "the run goes on in the process that runs it")
		case rep.Run.Status == journal.RunRunning:
			fmt.Fprintln(w, "the call goes on with the answer in the process that runs it")
		default:
			fmt.Fprintf(w, "next: the run still waits: mcpflow runs show %s\n", rep.Run.ID.Short())
		}
		return nil
	})
	return continuedEnd(o.Err, rep.Continued, err)
}

// redactedResponse is the answer as shown: secret fields redacted.
func redactedResponse(rep *service.AnswerReport) any {
	b := rep.Answer.Response
	if rep.Question != nil {
		b = rep.Question.Redact(b)
	}
	return json.RawMessage(b)
}
