package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/mcpflow/mcpflow/internal/inputfile"
	"github.com/mcpflow/mcpflow/upstream"
)

// printInstall prints, and never writes, the change to client's config
// that routes its servers through mcpflow proxy: what becomes of each
// server, the entries to add to the workspace's mcpflow.yaml, the diff of
// the client's file (configPath, or where the client keeps it for this
// workspace or user), and how to apply them. Values that may be secrets
// are never printed.
func printInstall(ctx context.Context, g *globals, w io.Writer, client, configPath string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := upstream.LookupClient(client)
	if err != nil {
		return usageError("--install: %v", err)
	}
	file, err := installFile(c, g.workspace, configPath)
	if err != nil {
		return err
	}
	src, err := inputfile.Read(file, 0)
	if err != nil {
		return fmt.Errorf("%s: cannot read: %w", file, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot tell where mcpflow is (it goes in the new entries): %w", err)
	}
	own, source, err := upstream.OwnServers(g.workspace)
	if err != nil {
		return err
	}
	configured := map[string]string{}
	for name, srv := range own {
		configured[name] = srv.Origin
	}
	in, err := upstream.PlanInstall(c, src, &upstream.InstallOptions{File: file, Executable: exe, Workspace: g.workspace, Configured: configured})
	if err != nil {
		return err
	}
	return writeInstall(w, in, &installWords{workspace: g.workspace, exe: exe, source: source})
}

// installFile is the client's file: the one named, or the first of the
// places the client keeps it that exists.
func installFile(c *upstream.Client, workspace, configPath string) (string, error) {
	if configPath != "" {
		return filepath.Abs(configPath)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find %s's configuration: %w (name it with --config FILE)", c.Title, err)
	}
	configDir, err := os.UserConfigDir()
	if err != nil {
		configDir = filepath.Join(home, ".config")
	}
	tried := c.ConfigFiles(workspace, home, configDir)
	for _, f := range tried {
		if _, err := os.Stat(f); err == nil {
			return f, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", f, err)
		}
	}
	return "", usageError("no %s configuration found (looked for %s; name it with --config FILE)", c.Title, strings.Join(tried, ", "))
}

// installWords is what printing the change needs beside the plan.
type installWords struct {
	workspace, exe string
	source         *upstream.Source // where mcpflow.yaml's servers come from
}

// writeInstall prints the change in, worded for the command line.
func writeInstall(w io.Writer, in *upstream.Install, o *installWords) error {
	c := in.Client
	ew := &installWriter{w: w}
	yamlFile := filepath.Join(o.workspace, upstream.WorkspaceFile)
	fmt.Fprintf(ew, "Routing %s's MCP servers through mcpflow proxy. Nothing is written: this is the change to make.\n\n", c.Title)
	fmt.Fprintf(ew, "  config     %s\n  workspace  %s\n  mcpflow    %s\n\n", in.File, o.workspace, o.exe)
	if strings.HasPrefix(o.exe, os.TempDir()+string(filepath.Separator)) {
		fmt.Fprintf(ew, "Note: this mcpflow runs from a temporary directory (go run?): install it, then run this again.\n\n")
	}
	if len(in.Entries) == 0 {
		fmt.Fprintf(ew, "%s configures no MCP server: nothing to change.\n", in.File)
		return ew.err
	}
	fmt.Fprintln(ew, "Servers:")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	var notes []string
	for _, e := range in.Entries {
		what, transport := "", "-"
		switch e.Action {
		case upstream.InstallProxy:
			transport = e.Server.Transport()
			what = "becomes mcpflow proxy " + e.Name
			if e.Configured != "" {
				what += fmt.Sprintf(" (mcpflow.yaml defines %s at %s: the proxy starts that entry)", e.Name, e.Configured)
			}
			if e.Server.URL != "" && len(e.Server.Headers) == 0 {
				notes = append(notes, fmt.Sprintf("%s: mcpflow does not do OAuth: if %s signs you in to this server, the proxy will be refused; give it a token in headers instead", e.Name, c.Title))
			}
		case upstream.InstallAlready:
			what = "left alone: already runs " + e.Reason
		default:
			what = "left unchanged: " + e.Reason
		}
		name := e.Name
		if e.Scope != "" {
			name += " (" + e.Scope + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, transport, what)
		if e.Action == upstream.InstallProxy && e.Scope == "user" {
			notes = append(notes, fmt.Sprintf("%s: a user-scoped server serves every project; through the proxy, its calls go to %s's journal from all of them", e.Name, o.workspace))
		}
		for _, warn := range e.Warnings {
			notes = append(notes, e.Name+": "+warn)
		}
	}
	tw.Flush()
	proxy, _, _ := in.Counts()
	if proxy == 0 {
		fmt.Fprintln(ew, "\nNothing to change.")
		return ew.err
	}
	step := 1
	if in.YAML != nil {
		fmt.Fprintf(ew, "\n%d. Add these servers to %s (under its servers:, if it has one):\n\n%s", step, yamlFile, in.YAML)
		step++
	}
	if imported := importsFile(o.source, in.File); imported {
		notes = append(notes, fmt.Sprintf("%s imports %s: once it is changed, its entries start mcpflow proxy itself; the servers: above take precedence over them, but remove %s from import:", yamlFile, in.File, in.File))
	}
	writeInstallVars(ew, in)
	fmt.Fprintf(ew, "\n%d. Change %s as this diff shows:\n\n%s", step, in.File, in.Diff)
	if in.Redacted {
		fmt.Fprintf(ew, "\nValues shown as \"<redacted>\" stay as they are in your file now (a secret is never printed):\nedit the file by hand; patch cannot apply a diff that shows them.\n")
	} else {
		fmt.Fprintf(ew, "\nTo apply it, save the diff in a file and run: patch %s < FILE\n", shellWord(in.File))
	}
	step++
	fmt.Fprintf(ew, "\n%d. %s. mcpflow --workspace %s servers list shows the servers the proxy starts.\n", step, restartWords(c), shellWord(o.workspace))
	if c.Name == "claude-code" {
		writeClaudeCommands(ew, in, o)
	}
	if len(notes) > 0 {
		fmt.Fprintln(ew, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintf(ew, "  %s\n", n)
		}
	}
	return ew.err
}

// restartWords says how the client picks up the change.
func restartWords(c *upstream.Client) string {
	switch c.Name {
	case "claude-code":
		return "Start a new Claude Code session (claude mcp list shows the new entries)"
	case "vscode":
		return "Restart the servers in VS Code (MCP: List Servers, then Restart)"
	case "gemini", "qwen":
		return "Start " + c.Title + " again (/mcp lists the servers)"
	}
	return "Restart " + c.Title
}

// writeInstallVars says where each variable of the new configuration
// comes from.
func writeInstallVars(w io.Writer, in *upstream.Install) {
	var passed, read []string
	for _, e := range in.Entries {
		for _, p := range e.Pass {
			if strings.HasPrefix(p.From, "input ") {
				passed = append(passed, fmt.Sprintf("%s\t%s: VS Code asks for %s, as it did", p.Name, e.Name, p.From))
			} else {
				passed = append(passed, fmt.Sprintf("%s\t%s: the value of its %s", p.Name, e.Name, p.From))
			}
		}
		for _, v := range e.Read {
			read = append(read, fmt.Sprintf("%s\t%s", v, e.Name))
		}
	}
	if len(passed) > 0 {
		fmt.Fprintf(w, "\nThe new entries set these variables in their env, from the values the old entries have\n(mcpflow.yaml refers to them, so no secret goes into the workspace):\n")
		installRows(w, passed)
	}
	if len(read) > 0 {
		fmt.Fprintf(w, "\nmcpflow reads these from the environment %s starts it in, as the server did:\n", in.Client.Title)
		installRows(w, read)
	}
}

func installRows(w io.Writer, rows []string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\n", r)
	}
	tw.Flush()
}

// writeClaudeCommands prints the claude mcp commands that make the same
// change as the diff.
func writeClaudeCommands(w io.Writer, in *upstream.Install, o *installWords) {
	var lines []string
	env := false
	for _, e := range in.Entries {
		if e.Action != upstream.InstallProxy {
			continue
		}
		scope := e.Scope
		if scope == "" {
			scope = "project"
		}
		add := []string{"claude", "mcp", "add", "--scope", scope}
		for _, p := range e.Pass {
			add = append(add, "--env", p.Name+"=\"$"+p.Name+"\"")
			env = true
		}
		add = append(add, shellWord(e.Name), "--", shellWord(o.exe))
		for _, a := range e.Args {
			add = append(add, shellWord(a))
		}
		lines = append(lines, fmt.Sprintf("claude mcp remove --scope %s %s", scope, shellWord(e.Name)), strings.Join(add, " "))
	}
	// Claude Code keys local and project scope by the directory it runs
	// in: the workspace for ~/.claude.json's projects, else the
	// .mcp.json's own directory.
	dir := o.workspace
	if filepath.Base(in.File) != ".claude.json" {
		dir = filepath.Dir(in.File)
	}
	if filepath.Base(in.File) == ".claude.json" {
		fmt.Fprintf(w, "\nOr, better for ~/.claude.json (Claude Code rewrites it while it runs), let Claude Code make\nthe change: run, in %s,\n\n", dir)
	} else {
		fmt.Fprintf(w, "\nOr let Claude Code make the change: run, in %s,\n\n", dir)
	}
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if env {
		fmt.Fprintln(w, "\nwith each variable of --env set in your shell to the value the entry has now.")
	}
}

// importsFile reports whether mcpflow.yaml imports file.
func importsFile(src *upstream.Source, file string) bool {
	if src == nil {
		return false
	}
	want := comparablePath(file)
	for _, f := range src.Imports {
		if comparablePath(f) == want {
			return true
		}
	}
	return false
}

// comparablePath is file with its symbolic links resolved when it exists.
func comparablePath(file string) string {
	if real, err := filepath.EvalSymlinks(file); err == nil {
		return real
	}
	return filepath.Clean(file)
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// installWriter remembers the first error of its writer.
type installWriter struct {
	w   io.Writer
	err error
}

func (e *installWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
