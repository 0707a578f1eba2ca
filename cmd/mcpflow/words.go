package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
)

// shortRun is a run's full id as users see it, short.
func shortRun(id string) string {
	if rid, err := journal.ParseID(id); err == nil {
		return rid.Short()
	}
	return id
}

// worded is err as the CLI words it: the service and the client return
// what happened, as codes and fields; the next step a user can take from
// a terminal is the CLI's to say. served says whether a server owns the
// journal (the command went through it).
func worded(err error, served bool) error {
	var lost *service.LostError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, service.ErrAbandoned):
		id := shortRun(service.FieldsOf(err)["run"])
		return &exitError{code: exitFailed, err: fmt.Errorf("run %s is not going anywhere: the process that ran it stopped before it ended; continue it with: mcpflow resume %s", id, id)}
	case errors.As(err, &lost):
		id := lost.Run.Short()
		return &exitError{code: exitFailed, err: fmt.Errorf("lost the process that serves the journal while following run %s: %v; mcpflow server resumes its runs when it starts again (mcpflow runs watch %s); a run of a command that ended with it is continued with: mcpflow resume %s", id, lost.Err, id, id)}
	case errors.Is(err, service.ErrNoTrustOverAPI):
		return usageError("--trust-workspace does not go through mcpflow server, which never grants trust over its API: trust the workspace (mcpflow trust add), or stop the server and run without it")
	case errors.Is(err, service.ErrNotShared):
		return usageError("--detach needs mcpflow server: a run started here ends with this command (start 'mcpflow server' in the workspace, or share a PostgreSQL journal with workers, then run again)")
	case errors.Is(err, service.ErrRunning) && service.FieldsOf(err)["run"] != "":
		f := service.FieldsOf(err)
		id := shortRun(f["run"])
		if f["where"] != "" {
			return fmt.Errorf("%w; follow it with 'mcpflow runs watch %s' where that worker serves", err, id)
		}
		return fmt.Errorf("%w; follow it with 'mcpflow runs watch %s', or cancel it with 'mcpflow runs cancel %s'", err, id, id)
	case errors.Is(err, journal.ErrNotFound) && service.FieldsOf(err)["kind"] == "run":
		return fmt.Errorf("%w (list runs with 'mcpflow runs list')", err)
	case errors.Is(err, service.ErrInvalid) && service.FieldsOf(err)["tool"] != "":
		f := service.FieldsOf(err)
		return fmt.Errorf("%w (see 'mcpflow servers tools %s %s')", err, f["server"], f["tool"])
	case errors.Is(err, service.ErrBusy):
		return &exitError{code: exitJournal, err: fmt.Errorf("%s: wait for it to end with --wait, or start 'mcpflow server' in the workspace to run several at once", holder(service.FieldsOf(err)))}
	case errors.Is(err, journal.ErrDamaged):
		return fmt.Errorf("%w; copy what is readable with 'mcpflow journal salvage OUT'", err)
	case errors.Is(err, journal.ErrLocked):
		return fmt.Errorf("%w; wait for it with --wait (run, resume, call), or start 'mcpflow server' in the workspace: every command then goes through it", err)
	case service.FieldsOf(err)["unknown_server"] != "":
		return fmt.Errorf("%w\n%s", err, lookedFor(service.FieldsOf(err)))
	case errors.Is(err, service.ErrNotRunning) && !served:
		return fmt.Errorf("%w: no mcpflow server runs in this workspace; a run that 'mcpflow run' started is cancelled with Ctrl-C where it runs", err)
	}
	return err
}

// lookedFor says, under an unknown server's error, where mcpflow looked
// for servers (the fields of service's lookedFor) and where else it
// could: the workflow's own directory, with --workspace.
func lookedFor(f map[string]string) string {
	ws := f["workspace"]
	var b strings.Builder
	if read := f["read"]; read != "" {
		fmt.Fprintf(&b, "  servers were looked for in the workspace %s, in: %s\n", ws, strings.ReplaceAll(read, "\n", ", "))
	} else {
		fmt.Fprintf(&b, "  servers were looked for in the workspace %s, which has no %s (and no --servers FILE was given)\n", ws, upstream.WorkspaceFile)
	}
	dir := ""
	if abs, err := filepath.Abs(f["workflow"]); err == nil && f["workflow"] != "" {
		dir = filepath.Dir(abs)
	}
	_, err := os.Stat(filepath.Join(dir, upstream.WorkspaceFile))
	switch {
	case dir != "" && dir != ws && err == nil:
		fmt.Fprintf(&b, "  the workflow is in %s, which has its own %s: to use it, pass --workspace %s", dir, upstream.WorkspaceFile, dir)
	case dir != "" && dir != ws:
		fmt.Fprintf(&b, "  the workflow is in %s: to use the servers configured in another directory, pass --workspace DIR (or --servers FILE)", dir)
	default:
		fmt.Fprintf(&b, "  define %q in %s or in the workflow's servers:, or pass --servers FILE, or --workspace DIR to use another directory's %s",
			f["unknown_server"], filepath.Join(ws, upstream.WorkspaceFile), upstream.WorkspaceFile)
	}
	return b.String()
}

// holder says who holds the journal for its one run, from the fields of
// its refusal (service.BusyError's, as its health's Owner carries them).
func holder(f map[string]string) string {
	run := ""
	if id, err := journal.ParseID(f["run"]); err == nil {
		run = ", run " + id.Short()
	}
	return fmt.Sprintf("the journal is held by '%s' (pid %s%s), which runs one run at a time", f["command"], f["pid"], run)
}
