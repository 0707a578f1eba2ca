package main

import (
	"errors"
	"io"

	"github.com/mcpflow/mcpflow/service"
)

// The commands whose record of a person's decision may continue a run
// (approve, reject, answer) share how they reach the journal, follow a
// run that goes on in a server, and end.

// continuing opens the journal for such a command: held here for the run
// to go on here (and served meanwhile, as resume does), unless the command
// only records (noContinue) or a server serves the journal.
func continuing(g *globals, noContinue bool, verb string, errw io.Writer) (service.API, func(), error) {
	if noContinue || g.served() {
		return g.backend(writeJournal)
	}
	return g.owner("mcpflow "+verb, errw)
}

// followDetached handles err when it says the command was interrupted
// while following the run in mcpflow server (the decision is journaled,
// the run goes on there): it reports the run as resume does, and says it
// did (handled).
func followDetached(g *globals, s ioStreams, svc service.API, err error, cols columns) (handled bool, _ error) {
	var detached *service.DetachedError
	if !errors.As(err, &detached) {
		return false, nil
	}
	got, err := afterInterrupt(s, svc, err, nil, false, func() progressSink { return progressFor(g, s.Out, cols) })
	if err != nil {
		return true, err
	}
	return true, reportRun(g, s, got)
}

// continuedEnd is how such a command ends once its output is printed
// (printErr): as resume does when the decision continued the run (c),
// else with printErr.
func continuedEnd(errw io.Writer, c *service.Report, printErr error) error {
	if err := ignoreClosedOutput(printErr); err != nil {
		return err
	}
	if c != nil {
		reportEnd(errw, c)
		return &exitError{code: statusCode(c.Run.Status)}
	}
	return nil
}
