package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/mcpflow/mcpflow/upstream"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
)

// Shell completion (cobra's `mcpflow completion bash|zsh|fish|powershell`)
// offers run ids, invocation ids, server names and state names.

func completeRunIDs(g *globals) cobra.CompletionFunc {
	return completeRuns(g, service.RunQuery{Limit: 100}, nil)
}

// completeCancellable offers the runs runs cancel can stop: running, and
// going somewhere (in mcpflow server, in the command that serves the
// journal, or in a live worker) — not finished runs, nor running ones that
// nothing runs any more (resume continues those).
func completeCancellable(g *globals) cobra.CompletionFunc {
	return completeRuns(g, service.RunQuery{Status: journal.RunRunning.String(), Limit: 100}, func(svc service.API) func(journal.ID) bool {
		stopped, _ := svc.Resumable()
		return func(id journal.ID) bool { return !slices.Contains(stopped, id) }
	})
}

// completeRuns offers the ids of the runs q lists, each with its workflow
// and status; keep, when set, is asked once for the test a run must pass.
func completeRuns(g *globals, q service.RunQuery, keep func(service.API) func(journal.ID) bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 || g.resolve(cmd) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		svc, done, err := g.backend(readJournal)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer done()
		runs, _ := svc.Runs(q)
		ok := func(journal.ID) bool { return true }
		if keep != nil {
			ok = keep(svc)
		}
		var out []cobra.Completion
		for _, r := range runs {
			if id := r.Run.ID.String(); strings.HasPrefix(id, toComplete) && ok(r.Run.ID) {
				out = append(out, cobra.CompletionWithDesc(id, r.Run.Workflow+" "+r.Run.Status.String()))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeApprovals offers the runs with a step that waits for approval,
// then that run's waiting steps.
func completeApprovals(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 1 || g.resolve(cmd) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		svc, done, err := g.backend(readJournal)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer done()
		var out []cobra.Completion
		if len(args) == 1 {
			rep, err := svc.RunDetail(args[0])
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, a := range rep.Run.PendingApprovals() {
				if strings.HasPrefix(a.Step, toComplete) {
					out = append(out, cobra.CompletionWithDesc(a.Step, a.Message))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		runs, _ := svc.Runs(service.RunQuery{Status: journal.RunBlocked.String(), Limit: 100})
		for _, r := range runs {
			if p := r.Run.PendingApprovals(); len(p) > 0 && strings.HasPrefix(r.Run.ID.String(), toComplete) {
				out = append(out, cobra.CompletionWithDesc(r.Run.ID.String(), r.Run.Workflow+" waits for approval of "+p[0].Step))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func completeInvocationIDs(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 || g.resolve(cmd) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		svc, done, err := g.backend(readJournal)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer done()
		q := service.InvocationQuery{Limit: 100}
		if cmd.Name() == "resolve" {
			q.State = journal.StateOutcomeUnknown.String()
		}
		invs, _ := svc.Invocations(q)
		var out []cobra.Completion
		for _, inv := range invs {
			if id := inv.ID.String(); strings.HasPrefix(id, toComplete) {
				out = append(out, cobra.CompletionWithDesc(id, stepName(&inv)+" "+api.TargetOf(&inv)+" "+inv.State.String()))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeServerTools offers server names, then, after a server, the tools
// it lists. Asking a server for its tools starts it, so this happens only
// where a command that only looks may start it (trust.MayLook: the user's
// own configuration outside the workspace, the --servers file named, or a
// trusted workspace), and within a few seconds; for a server an untrusted
// workspace's files define it offers nothing and starts nothing.
func completeServerTools(g *globals) cobra.CompletionFunc {
	servers := completeServerNames(g)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) != 1 {
			return servers(cmd, args, toComplete)
		}
		if g.resolve(cmd) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		workflow, _ := cmd.Flags().GetString("workflow")
		trusted, _ := cmd.Flags().GetBool("trust-workspace")
		svc, done, err := g.service(noJournal)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer done()
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		rep, err := svc.Tools(ctx, service.ToolsRequest{Server: args[0], Workflow: workflow, TrustWorkspace: trusted})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, t := range rep.Tools {
			if strings.HasPrefix(t.Tool.Name, toComplete) {
				out = append(out, cobra.CompletionWithDesc(t.Tool.Name, firstLine(t.Tool.Description)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func completeServerNames(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 || g.resolve(cmd) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		workflow, _ := cmd.Flags().GetString("workflow")
		svc, done, err := g.service(noJournal)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer done()
		set, err := svc.ServerSet(workflow)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range set.Names() {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, cobra.CompletionWithDesc(n, set[n].Transport()))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func fixedCompletions(values ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
}

// addCompletions wires completion functions into the command tree.
func addCompletions(root *cobra.Command, g *globals) {
	find := func(path ...string) *cobra.Command {
		c, _, err := root.Find(path)
		if err != nil {
			panic("completion for missing command " + strings.Join(path, " "))
		}
		return c
	}
	find("resume").ValidArgsFunction = completeRunIDs(g)
	find("runs", "show").ValidArgsFunction = completeRunIDs(g)
	find("runs", "watch").ValidArgsFunction = completeRunIDs(g)
	find("runs", "cancel").ValidArgsFunction = completeCancellable(g)
	find("approve").ValidArgsFunction = completeApprovals(g)
	find("reject").ValidArgsFunction = completeApprovals(g)
	find("journal", "show").ValidArgsFunction = completeInvocationIDs(g)
	find("journal", "resolve").ValidArgsFunction = completeInvocationIDs(g)
	find("servers", "tools").ValidArgsFunction = completeServerTools(g)
	find("servers", "resources").ValidArgsFunction = completeServerNames(g)
	find("servers", "prompts").ValidArgsFunction = completeServerNames(g)
	find("call").ValidArgsFunction = completeServerTools(g)
	find("proxy").ValidArgsFunction = completeServerNames(g)
	_ = find("proxy").RegisterFlagCompletionFunc("install", fixedCompletions(upstream.Clients()...))
	_ = find("journal", "resolve").RegisterFlagCompletionFunc("as", fixedCompletions("completed", "failed", "retry"))
	_ = find("journal", "list").RegisterFlagCompletionFunc("state", fixedCompletions("intent", "completed", "tool_error", "failed", "outcome_unknown", "aborted", "timed_out", "skipped", "retry_approved"))
	_ = find("runs", "list").RegisterFlagCompletionFunc("status", fixedCompletions("running", "succeeded", "failed", "blocked", "cancelled"))
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletions("table", "json", "jsonl"))
}
