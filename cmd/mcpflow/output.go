package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// Output is a view. When the reader of stdout or stderr goes away
// (mcpflow run wf.yaml | head -1), the command goes on with its work —
// a run to its end, journaled as always — and only stops saying it.
//
//   - keepRunningOnClosedPipes stops Go's runtime from killing the
//     process with SIGPIPE on a write to a closed pipe on fd 1 or 2: the
//     write fails with EPIPE instead (os/signal, "SIGPIPE").
//   - viewOf wraps stdout and stderr so that, once a write found the pipe
//     closed, no later write is attempted: printers that go on cost
//     nothing and never spin, and each failed write is errOutputClosed.
//   - A command whose outcome is more than its output (run, resume, call,
//     runs watch) takes errOutputClosed from its printer as the view gone,
//     not as its failure (ignoreClosedOutput): its exit code is its outcome's. For
//     any other command closed output ends it, quietly, with exitPipe, as
//     the shell reports a command a closed pipe killed.

// errOutputClosed: the reader of stdout or stderr has gone.
var errOutputClosed = errors.New("output closed by its reader")

// keepRunningOnClosedPipes asks for SIGPIPE, so that a write to a closed
// pipe fails with EPIPE rather than ending the process. signal.Ignore
// would do as much, but an ignored signal stays ignored in the servers
// mcpflow starts; a handler does not survive exec. Nothing reads the
// channel: the signal only has to be caught, once a process (the tests
// call run many times).
var keepRunningOnClosedPipes = sync.OnceFunc(func() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
})

// viewOf returns w as the commands write to it: as it is when it is a
// terminal (which cannot be a closed pipe, and whose descriptor the live
// display needs), otherwise wrapped in a pipeOutput.
func viewOf(w io.Writer) io.Writer {
	if isTerminal(w) {
		return w
	}
	return &pipeOutput{w: w}
}

// pipeOutput is an output that is not a terminal: a pipe, a file. Once a
// write fails with EPIPE it writes nothing more: every write fails at once
// with errOutputClosed, without a system call.
type pipeOutput struct {
	w      io.Writer
	closed atomic.Bool
}

func (p *pipeOutput) Write(b []byte) (int, error) {
	if p.closed.Load() {
		return 0, errOutputClosed
	}
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.closed.Store(true)
		return n, fmt.Errorf("%w: %w", errOutputClosed, err)
	}
	return n, err
}

// ignoreClosedOutput returns err, unless it says that the output was
// closed by its reader: the output was then a view of the command's work,
// and the command's outcome stands (nil).
func ignoreClosedOutput(err error) error {
	if errors.Is(err, errOutputClosed) {
		return nil
	}
	return err
}
