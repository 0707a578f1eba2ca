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

// errSamplingApproval: sampling.approve is set, and nothing yet asks an
// operator; the request is refused rather than sent unapproved.
var errSamplingApproval = errors.New("sampling: mcpflow.yaml sets approve: true, and this version of mcpflow cannot ask an operator yet; the request was not sent")

// createMessage answers a server's sampling/createMessage during a run: it
// is the one way a request reaches the provider, so what must happen
// between the two happens here. That is where the exchange is to be
// journaled with the attempt in flight (sealed like payloads), and where a
// request waits for an operator when sampling.approve is set; until then,
// such a request is refused, never sent unapproved.
func (sm *sampler) createMessage(ctx context.Context, server string, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if sm.err != nil {
		return nil, sm.err
	}
	if sm.cfg.Approve {
		return nil, errSamplingApproval
	}
	return sm.provider.CreateMessage(ctx, req)
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
		o.CreateMessage = sm.createMessage
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
