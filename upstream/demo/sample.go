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

// addSample registers the sample tool. It is written for the multi
// round-trip protocol of 2026-07-28: its first round answers with an input
// request (sampling/createMessage), and the round that brings the answer
// runs the tool (a ledger line, faults) and returns the model's text.
// go-sdk turns that into a request of the server's own during the call for
// clients of older protocols. A client that refuses the request fails the
// call with its error.
func addSample(d *demo, s *mcp.Server, drop dropFunc) {
	t := &mcp.Tool{Name: sampleTool, Description: "Ask the client's language model (sampling/createMessage) and return its answer.", InputSchema: sampleSchema}
	mcp.AddTool(s, t, func(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, any, error) {
		answer, ok := req.Params.InputResponses[sampleTool].(*mcp.CreateMessageWithToolsResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{sampleTool: &mcp.CreateMessageParams{
				Messages:     []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}},
				SystemPrompt: sampleSystemPrompt,
				MaxTokens:    in.MaxTokens,
			}}}, nil, nil
		}
		if _, err := d.execute(ctx, req, drop); err != nil {
			return nil, nil, err
		}
		var text string
		for _, c := range answer.Content {
			tc, ok := c.(*mcp.TextContent)
			if !ok {
				return nil, nil, fmt.Errorf("the client's model answered with %T content, not text", c)
			}
			text += tc.Text
		}
		return textResult(text), sampleOut{Text: text, Model: answer.Model, StopReason: answer.StopReason}, nil
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
