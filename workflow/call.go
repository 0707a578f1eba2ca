package workflow

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/upstream"
)

// LiteralTag marks a YAML value that is sent exactly as written: a
// "${{ … }}" inside it is text, never an expression.
//
//	with: !literal {template: "Hello ${{ name }}"}
const LiteralTag = "!literal"

// Call is the one-step workflow of a single tool call (mcpflow call): step
// "call" sends args to tool on server, exactly as given. set holds the
// configured servers; server must be one of them. The workflow is built as
// a value; its Source, which the journal keeps so that resume can continue
// the run, is a definition that loads back to the same workflow. It names
// the server without copying its entry: the entry's trust is read from the
// current configuration at every decision, and its env and headers (which
// may hold credentials) stay out of the journal.
func Call(server, tool string, args map[string]any, set upstream.Set) (*Workflow, error) {
	if _, err := set.Lookup(server); err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	name := "call " + server + " " + tool
	src, err := callDefinition(name, server, tool, args)
	if err != nil {
		return nil, err
	}
	st := &Step{ID: "call", Server: server, Tool: tool, With: Literal(args), Concurrency: 1, Retry: Retry{Attempts: 1}}
	return &Workflow{
		Name: name, Servers: upstream.Merge(set), Own: upstream.Set{}, Steps: []*Step{st},
		Path: name, Source: src,
	}, nil
}

// callDefinition is the YAML definition of a Call workflow: its arguments
// tagged !literal.
func callDefinition(name, server, tool string, args map[string]any) ([]byte, error) {
	var with yaml.Node
	if err := with.Encode(args); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	with.Tag, with.Style = LiteralTag, yaml.FlowStyle
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	step := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		str("id"), str("call"), str("server"), str(server), str("tool"), str(tool), str("with"), &with,
	}}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		str("name"), str(name),
		str("steps"), {Kind: yaml.SequenceNode, Content: []*yaml.Node{step}},
	}}
	return yaml.Marshal(doc)
}
