package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// argName is an argument's name in a usage line: FILE, RUN_ID, TOOL.
var argName = regexp.MustCompile(`^[A-Z][A-Z_]*$`)

// exactArgs is cobra.ExactArgs with a message that says which arguments
// are missing, by the names the command's usage line gives them, and the
// usage line: "missing FILE (usage: mcpflow run FILE)".
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		var names []string
		for _, f := range strings.Fields(cmd.Use)[1:] {
			if argName.MatchString(f) {
				names = append(names, f)
			}
		}
		usage := strings.TrimSpace(cmd.CommandPath() + " " + strings.Join(names, " "))
		if len(args) < n && len(args) < len(names) {
			return fmt.Errorf("missing %s (usage: %s)", strings.Join(names[len(args):], " "), usage)
		}
		return fmt.Errorf("%s takes %d argument%s, got %d (usage: %s)", cmd.CommandPath(), n, plural(n), len(args), usage)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
