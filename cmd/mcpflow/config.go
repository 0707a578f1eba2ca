package main

import (
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/workflow"
)

// external reads the servers configured outside workflows: the workspace's
// mcpflow.yaml (with its imports), then --servers FILE. It is read afresh
// each time, so a trust change in the configuration is seen at once.
func (g *globals) external() (servers.Set, error) {
	ws, _, err := servers.LoadWorkspace(g.workspace)
	if err != nil {
		return nil, err
	}
	if g.serversFile == "" {
		return ws, nil
	}
	flag, err := servers.Import(g.serversFile)
	if err != nil {
		return nil, err
	}
	return servers.Merge(ws, flag), nil
}

// trustStore is the user's store of trusted workspaces.
func (g *globals) trustStore() *servers.TrustStore { return servers.OpenTrustStore("") }

// trustFunc returns the engine's view of trust, read afresh on every call:
// server trust from the current configuration (the workflow's own servers:
// entries are fixed by its journaled definition), workspace trust from the
// trust store or --trust-workspace. A configuration that no longer reads
// grants no trust.
func (g *globals) trustFunc(wf *workflow.Workflow, flag bool) func(string) journal.Trust {
	store := g.trustStore()
	return func(name string) journal.Trust {
		var t journal.Trust
		if srv, ok := wf.Own[name]; ok {
			t.Server = srv.Trust
		} else if ext, err := g.external(); err == nil {
			if srv, ok := ext[name]; ok {
				t.Server = srv.Trust
			}
		}
		t.Workspace, t.WorkspaceSource = servers.WorkspaceTrust(store, g.workspace, flag)
		return t
	}
}

// loadWorkflow loads and validates a workflow file against the configured servers.
func loadWorkflow(file string, external servers.Set) (*workflow.Workflow, error) {
	return workflow.LoadFile(file, external)
}
