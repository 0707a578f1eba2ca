package service

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/sampling"
	"github.com/mcpflow/mcpflow/upstream"
)

// sampler answers the sampling requests of one execution's servers with the
// provider the workspace's mcpflow.yaml names.
type sampler struct {
	cfg      *upstream.Sampling // as read: no secret of the environment
	provider *sampling.Provider // nil when err is set
	err      error              // why there is no provider: an unset variable, bad options
}

// newSampler makes the sampler of cfg (nil: no sampling configured, and so
// no sampler). A provider that cannot be made is not an error here: the
// run goes on, and a server that asks for sampling gets the reason.
func newSampler(cfg *upstream.Sampling) *sampler {
	if cfg == nil {
		return nil
	}
	sm := &sampler{cfg: cfg}
	x, err := cfg.Expand(os.LookupEnv)
	if err == nil {
		sm.provider, err = sampling.New(&sampling.Options{BaseURL: x.BaseURL, Model: x.Model, APIKey: x.APIKey, Timeout: x.Timeout})
		if err != nil {
			err = fmt.Errorf("%s: %w", cfg.Origin, err)
		}
	}
	sm.err = err
	return sm
}

// send sends a server's sampling request to the provider: the one way a
// request reaches it. The engine calls it for the call that asked, after
// journaling the request (and waiting for an operator's approval when
// sampling.approve is set), and journals the answer.
func (sm *sampler) send(ctx context.Context, server string, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if sm.err != nil {
		return nil, sm.err
	}
	return sm.provider.CreateMessage(ctx, req)
}

// errSamplingOutsideCall: a run's server asked for sampling when none of
// its calls was in flight (or several were, and the request could not be
// told to one): it cannot be journaled with a call, and is not sent.
var errSamplingOutsideCall = errors.New("sampling: mcpflow answers a sampling request only during one call of a step, with which it is journaled; this one was not sent")

// outsideCall is the sampling hook of a run's sessions: the requests made
// during a call go to the call (upstream.Asker), never here.
func outsideCall(context.Context, string, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return nil, errSamplingOutsideCall
}

// errSamplingOutsideRun: a server asked for sampling on a session made
// only to look (listing servers or tools, validating).
var errSamplingOutsideRun = errors.New("sampling: mcpflow answers sampling requests only while a workflow runs, where each one is recorded")

// refuseOutsideRun is the sampling hook of the sessions made only to look:
// they declare the capability, as a run's sessions do, so that a server
// lists the same tools to both, and refuse every request.
func refuseOutsideRun(context.Context, string, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return nil, errSamplingOutsideRun
}

// samplingConfig is the sampling: section of workspace's mcpflow.yaml, nil
// when it has none. A file that does not load has none here: whoever
// reads its servers reports the error.
func (s *Service) samplingConfig(workspace string) *upstream.Sampling {
	cfg, err := upstream.LoadConfig(workspace, s.o.ServersFile)
	if err != nil {
		return nil
	}
	return cfg.Sampling
}

// runOptions are the options of the sessions of a run in workspace: its
// sampling requests go to sm (nil: no sampling capability).
func (s *Service) runOptions(workspace string, sm *sampler) *upstream.Options {
	o := &upstream.Options{Workspace: workspace, Self: s.o.Self}
	if sm != nil {
		o.CreateMessage = outsideCall
	}
	return o
}

// lookOptions are the options of the sessions made only to look (servers
// list, servers tools, validate): the capabilities of a run's, and no
// request answered.
func (s *Service) lookOptions() *upstream.Options {
	o := &upstream.Options{Workspace: s.o.Workspace, Self: s.o.Self}
	if s.samplingConfig(s.o.Workspace) != nil {
		o.CreateMessage = refuseOutsideRun
	}
	return o
}
