package demo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transferSchema is the transfer tool's input.
var transferSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"amount": {"type": "number", "exclusiveMinimum": 0, "description": "how much to transfer"},
		"to": {"type": "string", "minLength": 1, "description": "to whom"}
	},
	"required": ["amount", "to"],
	"additionalProperties": false
}`)

// confirmSchema is what the transfer tool asks the client for before its
// side effect: a confirmation, and a reference for the payee.
var confirmSchema = json.RawMessage(`{
	"type": "object",
	"properties": {
		"confirm": {"type": "boolean", "description": "make the transfer"},
		"reference": {"type": "string", "description": "shown to the payee"}
	},
	"required": ["confirm"]
}`)

type transferIn struct {
	Amount float64 `json:"amount"`
	To     string  `json:"to"`
}

// transfer asks for a confirmation before it appends its row to the ledger
// — through MCP's multi-round-trip requests (protocol 2026-07-28): its
// first answer is input_required, with an elicitation and a request state
// binding the answer to these arguments; the call sent again with the
// answer runs the effect (once it is accepted and confirmed). An older
// client is asked in the call instead (go-sdk's server middleware sends
// elicitation/create and calls this handler again with the answer).
func (d *demo) transfer(drop dropFunc) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in transferIn
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, fmt.Errorf("transfer: %w", err)
		}
		state := base64.RawURLEncoding.EncodeToString(req.Params.Arguments)
		answer, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
					Message:         fmt.Sprintf("Transfer %g to %s?", in.Amount, in.To),
					RequestedSchema: confirmSchema,
				}},
				RequestState: state,
			}, nil
		}
		if req.Params.RequestState != state {
			res := textResult("transfer not made: the answer was given for other arguments")
			res.IsError = true
			return res, nil
		}
		if confirmed, _ := answer.Content["confirm"].(bool); answer.Action != "accept" || !confirmed {
			why := answer.Action
			if answer.Action == "accept" {
				why = "not confirmed"
			}
			res := textResult("transfer not made: " + why)
			res.IsError = true
			return res, nil
		}
		seq, err := d.execute(ctx, req, drop)
		if err != nil {
			return nil, err
		}
		ref, _ := answer.Content["reference"].(string)
		res := textResult(fmt.Sprintf("transferred %g to %s (row %d, reference %q)", in.Amount, in.To, seq, ref))
		res.StructuredContent = map[string]any{"row": seq, "reference": ref}
		return res, nil
	}
}

// roots answers with the client's roots, asked for through MCP's
// multi-round-trip requests under protocol 2026-07-28 (an input request
// roots/list, answered with the call sent again), or by roots/list during
// the call with an older client (go-sdk's server middleware).
func (d *demo) roots(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	got, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult)
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil
	}
	var uris []string
	for _, r := range got.Roots {
		uris = append(uris, r.URI)
	}
	res := textResult(fmt.Sprintf("%d roots: %s", len(uris), strings.Join(uris, " ")))
	res.StructuredContent = map[string]any{"roots": uris}
	return res, nil
}
