package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/telemetry"
	"github.com/mcpflow/mcpflow/workflow"
)

// Exit codes, documented in the README and in --help.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitBlocked     = 3
	exitJournal     = 4
	exitInterrupted = 130
	// exitPipe: the reader of stdout or stderr went away before a command
	// that only reports had said everything; 128+SIGPIPE, as the shell
	// reports a command a closed pipe killed (output.go).
	exitPipe = 141
)

const exitCodesHelp = `Exit codes:
  0    succeeded
  1    run failed
  2    usage or validation error
  3    blocked: an invocation's outcome is unknown (resolve it, then resume),
       a step waits for approval (approve or reject it: the run goes on), or
       a server needs a login (mcpflow servers login NAME, then resume)
  4    journal unavailable (locked, damaged, cannot be opened, or written by a newer mcpflow)
  130  interrupted
  141  output closed by its reader (mcpflow ... | head -1) before a command that
       only reports was done; a command that runs or follows a run goes on to the
       run's end and exits with the run's code`

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error // nil: nothing more to print
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// codeFor maps an error to its exit code: an *exitError's own, else the
// one the service's table of codes gives (service.CodeOf), the same
// whether the command ran here or through a server.
func codeFor(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	}
	return service.CodeOf(err).Exit
}

func statusCode(s journal.RunStatus) int {
	switch s {
	case journal.RunSucceeded:
		return exitOK
	case journal.RunBlocked:
		return exitBlocked
	case journal.RunCancelled:
		return exitInterrupted
	}
	return exitFailed
}

// run executes the CLI and returns the process exit code. The first SIGINT
// or SIGTERM cancels the command's context (the run is journaled as
// cancelled and servers are stopped); a second one exits at once.
//
// A closed stdout or stderr does not end it (output.go): the command goes
// on, and says nothing of the pipe.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	keepRunningOnClosedPipes()
	stdout, stderr = viewOf(stdout), viewOf(stderr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	defer func() {
		signal.Stop(sigs)
		close(done)
	}()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			os.Exit(exitInterrupted)
		case <-done:
		}
	}()
	// Traces as the OTEL_* variables say (off by default), flushed at
	// exit within telemetry.ShutdownTimeout; a TRACEPARENT parents the run.
	shutdown, err := telemetry.Setup(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "mcpflow: tracing is off: %v\n", err)
		shutdown = func() error { return nil }
	}
	defer func() {
		if err := shutdown(); err != nil {
			fmt.Fprintf(stderr, "mcpflow: exporting traces: %v\n", err)
		}
	}()
	ctx = telemetry.FromEnv(ctx, os.Getenv)
	g := &globals{}
	root := newRootCommand(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err = worded(root.ExecuteContext(ctx), g.serving != nil && *g.serving)
	if err != nil && !g.started {
		// Cobra rejected the command line before any command ran.
		fmt.Fprintf(stderr, "mcpflow: %v\nRun 'mcpflow --help' for usage.\n", err)
		return exitUsage
	}
	if errors.Is(err, errOutputClosed) {
		return exitPipe // the reader left: nothing to say, and no one to say it to
	}
	var ee *exitError
	if err != nil && !(errors.As(err, &ee) && ee.err == nil) {
		printError(stderr, err)
	}
	return codeFor(err)
}

// printError writes err after "mcpflow: ". The errors of a workflow come
// one a line (workflow.Errors, here or read back from a server): each line
// gets the prefix, as one error alone would.
func printError(w io.Writer, err error) {
	msg := err.Error()
	if errors.Is(err, workflow.ErrInvalid) {
		msg = strings.ReplaceAll(msg, "\n", "\nmcpflow: ")
	}
	fmt.Fprintf(w, "mcpflow: %s\n", msg)
}
