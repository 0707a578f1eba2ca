package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/workflow"
)

type runOptions struct {
	ioStreams
	g              *globals
	wait           bool
	file           string
	inputs         []string
	inputFile      string
	trustWorkspace bool
	dryRun         bool
	detach         bool
	// cancelOnInterrupt cancels, on Ctrl-C, a run followed in mcpflow
	// server instead of asking.
	cancelOnInterrupt bool
}

func newRunCommand(g *globals, runF func(context.Context, *runOptions) error) *cobra.Command {
	o := &runOptions{g: g}
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a workflow",
		Long: `Run a workflow file. Each step's tools/call is journaled before it is sent.

While 'mcpflow server' owns the workspace's journal, the run goes in the server:
this command submits it and follows its progress. --detach prints the run id and
returns at once ('mcpflow runs watch ID' follows it). Ctrl-C stops following and
asks whether to cancel the run (--cancel-on-interrupt cancels it without asking;
without a terminal it goes on). -o jsonl prints each event as a JSON line as it
happens, then the run.

` + exitCodesHelp,
		Example: `  mcpflow run examples/workflows/hello.yaml
  mcpflow run deploy.yaml --input version=1.4.2 -o json
  mcpflow run deploy.yaml --detach    # with mcpflow server: print the run id and return`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.file = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.g.whileHeld(cmd.Context(), o.ioStreams, o.wait, func() error { return runRun(cmd.Context(), o) })
		},
	}
	cmd.Flags().StringArrayVarP(&o.inputs, "input", "i", nil, "workflow input as key=value, or key=@FILE to read the value from FILE (repeatable; also MCPFLOW_INPUT_<KEY>)")
	cmd.Flags().StringVar(&o.inputFile, "input-file", "", "read inputs from a YAML or JSON file of name: value (--input wins)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "show the calls the run would make — arguments and replay verdicts — without journaling or calling anything")
	cmd.Flags().BoolVar(&o.trustWorkspace, "trust-workspace", false, "trust this workspace for this command only (allows replay of calls the tool declares safe on trusted servers)")
	cmd.Flags().BoolVar(&o.detach, "detach", false, "with mcpflow server: start the run, print its id and return")
	cmd.Flags().BoolVar(&o.cancelOnInterrupt, "cancel-on-interrupt", false, "with mcpflow server: Ctrl-C cancels the run instead of asking")
	cmd.Flags().BoolVar(&o.wait, "wait", false, "when another command holds the journal, wait for it to end instead of failing")
	return cmd
}

func runRun(ctx context.Context, o *runOptions) error {
	var values map[string]any
	if o.inputFile != "" {
		var err error
		if values, err = workflow.ReadInputFile(o.inputFile); err != nil {
			return err
		}
	}
	req := service.RunRequest{File: o.file, Inputs: o.inputs, InputValues: values, TrustWorkspace: o.trustWorkspace}
	if o.dryRun {
		if o.detach {
			return usageError("--detach and --dry-run: a dry run starts nothing")
		}
		svc, done, err := o.g.service(noJournal) // a dry run writes nothing
		if err != nil {
			return err
		}
		defer done()
		calls, err := svc.DryRun(ctx, req)
		if err != nil {
			return err
		}
		return reportDryRun(o.g, o.ioStreams, calls)
	}
	b, done, err := o.g.owner("mcpflow run "+o.file, o.Err)
	if err != nil {
		return err
	}
	defer done()
	if o.detach {
		id, err := b.Submit(ctx, req)
		if err != nil {
			return err
		}
		return o.g.printer(o.Out).print(map[string]string{"run": id.String()}, func(w io.Writer) error {
			fmt.Fprintln(w, id)
			if _, ok := b.(*service.Local); ok {
				fmt.Fprintf(o.Err, "run %s submitted: the first mcpflow server worker on this journal to claim it runs it; follow it with: mcpflow runs watch %s\n", id.Short(), id.Short())
			} else {
				fmt.Fprintf(o.Err, "run %s started in mcpflow server; follow it with: mcpflow runs watch %s\n", id.Short(), id.Short())
			}
			return nil
		})
	}
	if l, ok := b.(*service.Local); ok && !l.ToWorkers(req) {
		// Through a server (or workers) its own environment serves its
		// servers.
		set, use := runServers(l.Service, o.file)
		if err := askInputs(ctx, o.ioStreams, set, use); err != nil {
			return err
		}
	}
	src, _ := workflow.ReadFile(o.file) // the run reports a file it cannot read
	cols := columnsOf(src)
	progress := progressFor(o.g, o.Out, cols)
	defer progress.close()
	req.Events = progress.event
	rep, err := b.Run(ctx, req)
	progress.close()
	if rep, err = afterInterrupt(o.ioStreams, b, err, rep, o.cancelOnInterrupt, func() progressSink { return progressFor(o.g, o.Out, cols) }); err != nil {
		return err
	}
	return reportRun(o.g, o.ioStreams, rep)
}

// afterInterrupt settles a run the user interrupted while following it in
// mcpflow server (err a *service.DetachedError; any other err or none is
// returned as it is, with rep): with cancel, or the user's yes on a
// terminal, the run is cancelled and followed to its end; otherwise it
// goes on in the server, and the error says how to follow it (exit 130).
func afterInterrupt(s ioStreams, b service.API, err error, rep *service.Report, cancel bool, sink func() progressSink) (*service.Report, error) {
	var ie *service.DetachedError
	if !errors.As(err, &ie) {
		return rep, err
	}
	if !cancel && interactive(s) {
		cancel = confirm(s.In, s.Err, fmt.Sprintf("\nCancel run %s? [y/N] ", ie.Run.Short()))
	}
	if !cancel {
		id := ie.Run.Short()
		return nil, &exitError{code: exitInterrupted, err: fmt.Errorf("stopped following run %s, which goes on in mcpflow server; follow it with: mcpflow runs watch %s", id, id)}
	}
	if err := b.Cancel(ie.Run.String(), "cancelled by "+osUser()+" (interrupted)"); err != nil && !errors.Is(err, service.ErrNotRunning) {
		return nil, err
	}
	progress := sink()
	defer progress.close()
	// A second interrupt while the run winds down exits at once.
	return b.Watch(context.Background(), ie.Run.String(), progress.event)
}

// reportRun prints a run's end as run and resume do: its outputs (table) or
// the run object (json, jsonl), and on stderr what a blocked run waits for.
// It returns the exit code of the run's status, output closed by its reader
// or not.
func reportRun(g *globals, s ioStreams, rep *service.Report) error {
	err := g.printer(s.Out).print(api.RunOf(rep.Run, rep.Invocations), func(w io.Writer) error {
		printOutputs(w, rep.Run.Outputs)
		return nil
	})
	if err := ignoreClosedOutput(err); err != nil {
		return err
	}
	reportEnd(s.Err, rep)
	return &exitError{code: statusCode(rep.Run.Status)}
}

func round(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(10 * time.Millisecond)
	case d > time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// reportEnd says on stderr what to do about a run that did not succeed: what
// a blocked run waits for, and how to continue a cancelled one.
func reportEnd(w io.Writer, rep *service.Report) {
	switch rep.Run.Status {
	case journal.RunBlocked:
		reportBlocked(w, rep)
	case journal.RunCancelled:
		fmt.Fprintf(w, "mcpflow: run %s was interrupted; continue it with: mcpflow resume %s\n", rep.Run.ID.Short(), rep.Run.ID.Short())
	case journal.RunFailed:
		if e := rep.Run.Error; e != nil && e.Code == engine.CodeServerUnavailable {
			// A read that failed after its replays stands failed: only an
			// operator's retry sends it again.
			retry := ""
			for _, inv := range rep.Invocations {
				if inv.State == journal.StateFailed && inv.Method.Reads() {
					retry = " --retry-failed"
				}
			}
			fmt.Fprintf(w, "mcpflow: once the server is back, continue it with: mcpflow resume %s%s\n", rep.Run.ID.Short(), retry)
		}
	}
}

// plannedView is the stable JSON shape of run --dry-run.
type plannedView struct {
	Step      string          `json:"step"`
	Item      *int            `json:"item"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Method    string          `json:"method,omitempty"` // resources/read or prompts/get; absent for a tools/call
	Arguments json.RawMessage `json:"arguments"`
	Skipped   bool            `json:"skipped"`
	Approval  *approvalAsk    `json:"approval"`
	Pending   string          `json:"pending,omitempty"`
	Replay    *api.Replay     `json:"replay"`
	Problem   string          `json:"problem,omitempty"`
}

// approvalAsk is a step's approve: as a dry run shows it.
type approvalAsk struct {
	Message string `json:"message"`
}

// reportDryRun prints the calls a run would make; a call that could not be
// sent as it stands makes the exit code 2.
func reportDryRun(g *globals, s ioStreams, calls []service.PlannedCall) error {
	views := make([]plannedView, len(calls))
	problems := 0
	for i, c := range calls {
		v := plannedView{Step: c.Step, Server: c.Server, Tool: c.Tool, Method: string(c.Method), Arguments: c.Arguments, Skipped: c.Skipped, Pending: c.Pending, Problem: c.Problem}
		if c.Item >= 0 {
			item := c.Item
			v.Item = &item
		}
		if c.Approve {
			v.Approval = &approvalAsk{Message: c.ApproveMessage}
		}
		if v.Arguments == nil {
			v.Arguments = json.RawMessage("null")
		}
		if c.Verdict.Reason != "" {
			r := api.ReplayOf(c.Verdict, c.Declared)
			v.Replay = &r
		}
		if c.Problem != "" {
			problems++
		}
		views[i] = v
	}
	err := g.printer(s.Out).print(views, func(w io.Writer) error {
		t := newTable(w, "STEP", "CALL", "ARGUMENTS", "REPLAY IF LOST", "NOTE")
		for _, v := range views {
			args, replayText := string(v.Arguments), "-"
			if v.Replay != nil {
				replayText = "no: " + v.Replay.Reason
				if v.Replay.Safe {
					replayText = "yes: " + v.Replay.Reason
				}
			}
			note := v.Problem
			switch {
			case v.Skipped:
				args, note = "-", "skipped: its condition is false"
			case v.Pending != "" && note == "":
				args, note = "?", "known only when the run gets there: "+v.Pending
			}
			if v.Approval != nil && !v.Skipped {
				ask := "waits for approval (mcpflow approve)"
				if v.Approval.Message != "" {
					ask = fmt.Sprintf("waits for approval: %q", v.Approval.Message)
				}
				note = joinNote(ask, note)
			}
			t.row(unitName(v.Step, itemOr(v.Item)), api.Target(journal.Method(v.Method), v.Server, v.Tool), args, replayText, note)
		}
		if err := t.flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintln(w, "\ndry run: nothing was journaled and no tool was called")
		return err
	})
	if err != nil {
		return err
	}
	if problems > 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("dry run: %d call(s) could not be sent as they stand", problems)}
	}
	return nil
}

func joinNote(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

func itemOr(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
