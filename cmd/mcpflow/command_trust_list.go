package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newTrustListCommand(g *globals, runF func(*trustOptions) error) *cobra.Command {
	return trustCommand(g, "list [DIR]", "List trusted directories, or say whether DIR is trusted", runF, runTrustList)
}

func runTrustList(o *trustOptions) error {
	store := o.g.trustStore()
	p := o.g.printer(o.Out)
	if o.given {
		ok, by, err := store.Trusted(o.dir)
		if err != nil {
			return err
		}
		return p.print(map[string]any{"path": o.dir, "trusted": ok, "by": by}, func(w io.Writer) error {
			if ok {
				_, err := fmt.Fprintf(w, "%s is trusted (by %s)\n", o.dir, by)
				return err
			}
			_, err := fmt.Fprintf(w, "%s is not trusted\n", o.dir)
			return err
		})
	}
	dirs, err := store.List()
	if err != nil {
		return err
	}
	if dirs == nil {
		dirs = []string{}
	}
	return p.print(dirs, func(w io.Writer) error {
		if len(dirs) == 0 {
			fmt.Fprintln(w, "no trusted workspaces (mcpflow trust add [DIR] adds one)")
		}
		for _, d := range dirs {
			fmt.Fprintln(w, d)
		}
		return nil
	})
}
