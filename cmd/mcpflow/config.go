package main

import (
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/servers"
	"github.com/mcpflow/mcpflow/trust"
	"github.com/mcpflow/mcpflow/workflow"
)

// external reads the servers configured outside workflows: the workspace's
// mcpflow.yaml (with its imports), then --servers FILE.
func (g *globals) external() (servers.Set, error) {
	set, _, err := servers.LoadExternal(g.workspace, g.serversFile)
	return set, err
}

// trustStore is the user's store of trusted workspaces.
func (g *globals) trustStore() *trust.Store { return trust.OpenStore("") }

// trustFunc returns the engine's view of trust for one run: server trust
// from the current configuration (the workflow's own servers: entries are
// fixed by its journaled definition), workspace trust from the trust store
// or --trust-workspace, both seen afresh whenever their files change.
func (g *globals) trustFunc(wf *workflow.Workflow, flag bool) func(string) journal.Trust {
	r := trust.NewResolver(&trust.Options{
		Workspace: g.workspace,
		Flag:      flag,
		Store:     g.trustStore(),
		Own:       wf.Own,
		External:  func() (servers.Set, []string, error) { return servers.LoadExternal(g.workspace, g.serversFile) },
	})
	return r.Trust
}

// loadWorkflow loads and validates a workflow file against the configured servers.
func loadWorkflow(file string, external servers.Set) (*workflow.Workflow, error) {
	return workflow.LoadFile(file, external)
}
