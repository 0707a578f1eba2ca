package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// askInputs asks, on a terminal, for the VS Code inputs (${input:ID},
// read as MCPFLOW_INPUT_ID) that the servers named in use need and the
// environment does not give, before anything starts: without echo, as VS
// Code asks for a password. Each answer is set in this process's
// environment, where the servers' entries read it when they start. Off a
// terminal nothing is asked: the server that needs the input reports what
// to set.
func askInputs(ctx context.Context, s ioStreams, set upstream.Set, use []string) error {
	in, ok := s.In.(*os.File)
	if !ok || !interactive(s) {
		return nil
	}
	var asked []string
	for _, name := range use {
		srv := set[name]
		if srv == nil {
			continue
		}
		for _, v := range srv.EnvRefs() {
			if _, set := os.LookupEnv(v); set || !strings.HasPrefix(v, "MCPFLOW_INPUT_") || slices.Contains(asked, v) {
				continue
			}
			b, err := askSecret(ctx, in, s.Err, fmt.Sprintf("server %s asks for a VS Code input (%s): ", name, v))
			if err != nil {
				return fmt.Errorf("reading %s: %w", v, err)
			}
			os.Setenv(v, string(b))
			asked = append(asked, v)
		}
	}
	return nil
}

// runServers names the servers a workflow's steps use, with the servers it
// can reach; nil when the workflow does not load (the run reports why).
func runServers(svc *service.Service, file string) (upstream.Set, []string) {
	external, err := svc.ServerSet("")
	if err != nil {
		return nil, nil
	}
	wf, err := workflow.LoadFile(file, external)
	if err != nil {
		return nil, nil
	}
	var use []string
	for _, st := range wf.Steps {
		if !slices.Contains(use, st.Server) {
			use = append(use, st.Server)
		}
	}
	return wf.Servers, use
}
