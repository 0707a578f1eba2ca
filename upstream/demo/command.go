package demo

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

// ServeCommand serves the demo over standard input and output when args
// are "demo-server FLAGS…", as `mcpflow demo-server` does, and returns the
// exit code and true; for any other args it returns false. A test binary
// that stands in for mcpflow (Options.Self of the upstream package) calls it
// first in its TestMain.
func ServeCommand(args []string) (int, bool) {
	if len(args) == 0 || args[0] != "demo-server" {
		return 0, false
	}
	var cfg Config
	fs := pflag.NewFlagSet("demo-server", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2, true
	}
	if err := Serve(context.Background(), cfg, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	return 0, true
}
