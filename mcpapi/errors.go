package mcpapi

import "errors"

// ErrNoWorkflows: the directory a Server offers holds no workflow that
// loads; the Server still serves list_runs and show_run.
var ErrNoWorkflows = errors.New("no workflows to offer")

// ErrDir: the directory of workflows cannot be read.
var ErrDir = errors.New("cannot read the directory of workflows")
