package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sampleTool asks the client for sampling: the one demo tool that sends a
// request of its own. It is listed only to clients that declare the
// sampling capability, as server-everything's trigger-sampling-request is,
// and declares no annotations (it is not in [declared]).
const sampleTool = "sample"

// sampleSystemPrompt is the system prompt of every request the sample tool
// sends.
const sampleSystemPrompt = "You are the mcpflow demo server's assistant. Answer briefly."

type (
	sampleIn struct {
		Prompt    string `json:"prompt"`
		MaxTokens int64  `json:"max_tokens"`
	}
	sampleOut struct {
		Text       string `json:"text"`
		Model      string `json:"model"`
		StopReason string `json:"stopReason,omitempty"`
	}
)

var sampleSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"prompt": {"type": "string", "description": "what to ask the client's language model"},
		"max_tokens": {"type": "integer", "minimum": 1, "default": 100, "description": "the most tokens the answer may have"}
	},
	"required": ["prompt"],
	"additionalProperties": false
}`)

// addSample registers the sample tool. On the protocol of 2026-07-28 it
// is a multi round-trip tool: its first round answers with an input request
// (sampling/createMessage), and the round that brings the answer runs. On
// older protocols it sends the request itself during the call, as servers
// written for them do. Either way the tool runs (a ledger line, faults)
// only once the model answered; a client that refuses, or whose model
// fails, makes the call a tool error (isError) that says why.
func addSample(d *demo, s *mcp.Server, drop dropFunc) {
	t := &mcp.Tool{Name: sampleTool, Description: "Ask the client's language model (sampling/createMessage) and return its answer.", InputSchema: sampleSchema}
	mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, any, error) {
		ask := &mcp.CreateMessageParams{
			Messages:     []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
			SystemPrompt: sampleSystemPrompt,
			MaxTokens:    in.MaxTokens,
		}
		var answer *mcp.CreateMessageResult
		if p := req.Session.InitializeParams(); p != nil && p.ProtocolVersion < "2026-07-28" {
			var err error
			if answer, err = req.Session.CreateMessage(ctx, ask); err != nil {
				res := textResult("the client did not answer the sampling request: " + err.Error())
				res.IsError = true
				return res, nil, nil
			}
		} else {
			got, ok := req.Params.InputResponses[sampleTool].(*mcp.CreateMessageWithToolsResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{sampleTool: ask}}, nil, nil
			}
			answer = &mcp.CreateMessageResult{Model: got.Model, StopReason: got.StopReason, Role: got.Role}
			if len(got.Content) == 1 {
				answer.Content = got.Content[0]
			}
		}
		tc, ok := answer.Content.(*mcp.TextContent)
		if !ok {
			res := textResult(fmt.Sprintf("the client's model answered with %T content, not text", answer.Content))
			res.IsError = true
			return res, nil, nil
		}
		if _, err := d.execute(ctx, req, drop); err != nil {
			return nil, nil, err
		}
		return textResult(tc.Text), sampleOut{Text: tc.Text, Model: answer.Model, StopReason: answer.StopReason}, nil
	})
}

// listSampleToSamplers is receiving middleware that leaves the sample tool
// out of tools/list results for a client that did not declare the sampling
// capability. (A page that held it is one tool short.)
func listSampleToSamplers(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/list" {
			return res, err
		}
		var lr *mcp.ListToolsResult
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			lr = r
		case *declaredList:
			lr = r.ListToolsResult
		default:
			return res, err
		}
		if c, ok := req.(interface {
			ClientCapabilities() *mcp.ClientCapabilities
		}); ok {
			if caps := c.ClientCapabilities(); caps != nil && caps.Sampling != nil {
				return res, nil
			}
		}
		lr.Tools = slices.DeleteFunc(slices.Clone(lr.Tools), func(t *mcp.Tool) bool { return t.Name == sampleTool })
		return res, nil
	}
}

// protocolVersions are the versions a server speaking up to newest
// supports, newest first; nil for "" (go-sdk's own list).
func protocolVersions(newest string) ([]string, error) {
	if newest == "" {
		return nil, nil
	}
	all := mcp.SupportedProtocolVersions()
	i := slices.Index(all, newest)
	if i < 0 {
		return nil, fmt.Errorf("demo: unknown protocol version %q (supported: %v)", newest, all)
	}
	return all[i:], nil
}
