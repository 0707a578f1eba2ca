package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

type runsWatchOptions struct {
	ioStreams
	g   *globals
	run string
}

func newRunsWatchCommand(g *globals, runF func(context.Context, *runsWatchOptions) error) *cobra.Command {
	o := &runsWatchOptions{g: g}
	return &cobra.Command{
		Use:   "watch RUN_ID",
		Short: "Follow a run going in mcpflow server until it ends",
		Long: `Follow a run that goes in 'mcpflow server' (started by another command, the API or
the web UI): its progress as 'mcpflow run' shows it, then its outputs, and the exit
code of how it ended. A run that already ended is reported at once. Ctrl-C stops
watching; the run goes on.

Without a server there is nothing to watch: a run goes only in the command that
started it. watch then reports a run that ended, and says a run left running was
interrupted (continue it with 'mcpflow resume'). A session of 'mcpflow proxy' is
followed from the journal to its end, with or without a server.

` + exitCodesHelp,
		Example: `  mcpflow run deploy.yaml --detach
  mcpflow runs watch 01a2375e-c529`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ioStreams, o.run = streams(cmd), args[0]
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runRunsWatch(cmd.Context(), o)
		},
	}
}

func runRunsWatch(ctx context.Context, o *runsWatchOptions) error {
	b, done, err := o.g.backend(readJournal)
	if err != nil {
		return err
	}
	// Read once here, for the step lines' widths and for how to follow
	// it (watch); Watch reads it again, once subscribed.
	first, _ := b.RunDetail(o.run)
	cols := columns{}
	if first != nil && first.Run != nil {
		cols = columnsOf(first.Run.Definition)
	}
	progress := progressFor(o.g, o.Out, cols)
	defer progress.close()
	followed := false // events come on this goroutine, from Watch
	events := func(ev engine.Event) {
		followed = true
		progress.event(ev)
	}
	rep, err := o.g.watch(ctx, b, done, first, o.run, events)
	var lost *service.LostError
	if errors.As(err, &lost) && errors.Is(err, service.ErrUnreachable) {
		// The process that served the journal is gone — a command's run
		// ends with it: how the run ended is in the journal, free now
		// (or served by whoever holds it next).
		o.g.serving = nil
		if b, done, err = o.g.backend(readJournal); err == nil {
			first, _ = b.RunDetail(o.run)
			rep, err = o.g.watch(ctx, b, done, first, o.run, events)
		}
	}
	progress.close()
	var ie *service.DetachedError
	if errors.As(err, &ie) {
		return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped watching run %s, which goes on where it runs", ie.Run.Short())}
	}
	if err != nil {
		return err
	}
	if !followed && rep.Run.FinishedAt != nil && !o.g.printer(o.Out).structured() {
		fmt.Fprintf(o.Err, "run %s ended %s: %s\n", rep.Run.ID.Short(), o.g.times.at(*rep.Run.FinishedAt), rep.Run.Status)
	}
	return reportRun(o.g, o.ioStreams, rep)
}

// watch watches run ref, as rep read it (nil: unread), through b, and
// closes b (done) when it is over. A proxy session on a journal file,
// going in the proxy's process, is followed from the journal instead,
// read through whatever serves it at each read and held by none between
// reads: the proxy takes the journal for each of its calls, and a watch
// holding it would lock it out.
func (g *globals) watch(ctx context.Context, b service.API, done func(), rep *service.Report, ref string, events func(engine.Event)) (*service.Report, error) {
	if rep == nil || rep.Run == nil || journal.IsPostgres(g.journalPath) || !service.ProxyAlive(rep.Run) {
		defer done()
		return b.Watch(ctx, ref, events)
	}
	done()
	id := rep.Run.ID.String()
	return service.FollowProxy(ctx, rep.Run.ID, func() (*service.Report, error) { return g.readRun(ctx, id) }, events)
}

// readRun reads run id through whatever serves the journal now, holding
// nothing after. The journal changes hands as a proxy takes it for its
// calls and lets it go: a read that finds it locked by a process about to
// serve it, or loses the process that served it, is tried again, for up
// to handOverWait.
func (g *globals) readRun(ctx context.Context, id string) (*service.Report, error) {
	deadline := time.Now().Add(handOverWait)
	for {
		rep, err := g.readRunOnce(id)
		if err == nil || !handingOver(err) || time.Now().After(deadline) {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// handOverWait bounds how long a read waits for the journal to change hands.
const handOverWait = 20 * time.Second

// handingOver reports whether err is a read's that met the journal
// changing hands: locked, or its server gone (a dial refused or finding
// no socket is ErrUnreachable) or going while asked.
func handingOver(err error) bool {
	for _, e := range []error{journal.ErrLocked, service.ErrUnreachable, service.ErrStopping, io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (g *globals) readRunOnce(id string) (*service.Report, error) {
	g.serving = nil
	b, done, err := g.backend(readJournal)
	if err != nil {
		return nil, err
	}
	defer done()
	return b.RunDetail(id)
}
