package upstream_test

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/upstream"
)

func ExampleParseEntry() {
	var doc yaml.Node
	yaml.Unmarshal([]byte("url: https://mcp.example.com/mcp\nheaders: {Authorization: \"Bearer ${TOKEN}\"}\ntrsut: true\n"), &doc)
	_, err := upstream.ParseEntry("flow.yaml", "remote", doc.Content[0])
	fmt.Println(err)
	// Output: flow.yaml:3:1: server remote: unknown key "trsut" (did you mean "trust"?)
}

func ExampleMerge() {
	workspace := upstream.Set{
		"docs": {Name: "docs", URL: "https://docs.example.com/mcp", Trust: true},
		"demo": {Name: "demo", Builtin: "demo"},
	}
	workflow := upstream.Set{"docs": {Name: "docs", URL: "https://staging.example.com/mcp"}}
	for name, srv := range upstream.Merge(workspace, workflow) {
		if name == "docs" {
			fmt.Println(srv.URL, srv.Trust)
		}
	}
	// Output: https://staging.example.com/mcp false
}
