// Command mcpflow runs durable MCP tool workflows. See the README.
package main

import (
	"os"

	"github.com/mcpflow/mcpflow/internal/gcpolicy"
	"github.com/mcpflow/mcpflow/upstream"
)

func main() {
	if upstream.Supervising() {
		// Started as a command server's supervisor, not as the CLI.
		os.Exit(upstream.Supervise(os.Args[1:]))
	}
	gcpolicy.Apply()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
