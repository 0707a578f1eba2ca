package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/itchyny/gojq"
	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/client"
	"github.com/mcpflow/mcpflow/door"
	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/service"
	"github.com/mcpflow/mcpflow/telemetry"
	"github.com/mcpflow/mcpflow/trust"
)

// globals are the flags every command shares.
type globals struct {
	journalFlag   string
	workspaceFlag string
	serversFile   string
	// journalPath and workspace are resolved from the flags (resolve).
	journalPath string
	workspace   string
	output      string
	// jsonFields and jqExpr are --json and --jq; fields and jq are
	// them parsed.
	jsonFields, jqExpr string
	fields             []string
	jq                 *gojq.Code
	noColor            bool
	timeFlag           string
	times              timeFormat
	// serving caches served's answer.
	serving *bool
	// worker is how this process joins a journal shared by workers
	// (PostgreSQL): mcpflow server sets its --worker-id, --lease, and
	// that it claims runs.
	worker journal.Options
	// started is set once cobra accepted the command line and a command's
	// own code runs; errors before that are usage errors.
	started bool
	// onOpen, when set, is called once the service has opened the journal
	// for writing (its lock taken): the journal's owner serves from then
	// on (owner.go). It must not call the service.
	onOpen func(*service.Service)
}

func newRootCommand(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "mcpflow",
		Short: "Durable workflows of MCP tool calls, journaled before they are sent",
		Long: `mcpflow runs multi-step workflows of MCP tool calls from YAML. Every tools/call
is written to a journal before it is sent; when a connection breaks or the process
crashes, mcpflow replays a call only when the tool declares it safe and both the
server and the workspace are trusted — otherwise the call is marked outcome unknown.

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			g.started = true
			return g.resolve(cmd)
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&g.journalFlag, "journal", "", "journal file (env MCPFLOW_JOURNAL; default WORKSPACE/.mcpflow/journal.db)")
	root.PersistentFlags().StringVar(&g.workspaceFlag, "workspace", "", "workspace directory (default: the current directory)")
	root.PersistentFlags().StringVar(&g.serversFile, "servers", "", "also use the MCP servers in this file (Claude Desktop, Cursor, .mcp.json, VS Code, Gemini CLI or mcpflow.yaml format)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table, json or jsonl")
	root.PersistentFlags().StringVar(&g.jsonFields, "json", "", "print JSON with only these fields (comma-separated; an unknown one lists them all)")
	root.PersistentFlags().StringVar(&g.jqExpr, "jq", "", "filter the JSON output with a jq expression (strings printed raw)")
	root.PersistentFlags().StringVar(&g.timeFlag, "time-format", "relative", "times in tables: relative (5m ago; older ones with date and zone) or iso (RFC 3339)")
	root.PersistentFlags().BoolVar(&g.noColor, "no-color", false, "disable colour (also NO_COLOR)")
	root.AddCommand(
		newRunCommand(g, nil),
		newResumeCommand(g, nil),
		newApproveCommand(g, nil),
		newRejectCommand(g, nil),
		newAnswerCommand(g, nil),
		newValidateCommand(g, nil),
		newCallCommand(g, nil),
		newProxyCommand(g, nil),
		newServersCommand(g),
		newTrustCommand(g),
		newRunsCommand(g),
		newJournalCommand(g),
		newServerCommand(g, nil),
		newMCPCommand(g, nil),
		newDemoServerCommand(),
		newVersionCommand(g),
	)
	addCompletions(root, g)
	return root
}

func (g *globals) resolve(cmd *cobra.Command) error {
	switch g.output {
	case "table", "json", "jsonl":
	default:
		return usageError("--output %q: want table, json or jsonl", g.output)
	}
	var err error
	if g.times, err = parseTimeFormat(g.timeFlag); err != nil {
		return err
	}
	if cmd.Flags().Changed("json") {
		if g.fields = parseFields(g.jsonFields); len(g.fields) == 0 {
			return usageError("--json: name the fields to print, comma-separated (an unknown one lists them all)")
		}
	}
	if g.jqExpr != "" {
		q, err := gojq.Parse(g.jqExpr)
		if err != nil {
			return usageError("--jq %q: %v", g.jqExpr, err)
		}
		if g.jq, err = gojq.Compile(q); err != nil {
			return usageError("--jq %q: %v", g.jqExpr, err)
		}
	}
	ws := g.workspaceFlag
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		ws = wd
	}
	abs, err := filepath.Abs(ws)
	if err != nil {
		return err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		// A typo must not become a new workspace with its own journal.
		return usageError("--workspace %s: not an existing directory", ws)
	}
	g.workspace = abs
	g.journalPath = g.journalFlag
	if g.journalPath == "" {
		g.journalPath = os.Getenv("MCPFLOW_JOURNAL")
	}
	if g.journalPath == "" {
		g.journalPath = filepath.Join(g.workspace, ".mcpflow", "journal.db")
	}
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		g.noColor = true
	}
	return nil
}

// ioStreams are a command's standard streams, taken from cobra when the
// command runs (tests set them with SetIn, SetOut, SetErr).
type ioStreams struct {
	In       io.Reader
	Out, Err io.Writer
}

func streams(cmd *cobra.Command) ioStreams {
	return ioStreams{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
}

// journalMode says how a command needs the journal.
type journalMode uint8

const (
	noJournal    journalMode = iota // servers, validate, trust: no journal
	readJournal                     // queries: read-only, and it must exist
	writeJournal                    // run, resume, call, resolve, prune: created if missing
)

// service returns the service every command works through, and the
// function that closes it. The service opens the journal as the command
// needs it, when a request first touches it: a request refused before (a
// workflow that does not load) leaves no journal behind.
func (g *globals) service(mode journalMode) (*service.Service, func(), error) {
	var svc *service.Service // set below, before any request opens the journal
	o := &service.Options{Workspace: g.workspace, ServersFile: g.serversFile, TrustStore: g.trustStore()}
	switch mode {
	case readJournal:
		o.OpenJournal = func() (journal.Store, error) {
			if _, err := os.Stat(g.journalPath); os.IsNotExist(err) && !journal.IsPostgres(g.journalPath) {
				return nil, &exitError{code: exitFailed, err: fmt.Errorf("no journal at %s: nothing has run in this workspace yet (try 'mcpflow run FILE', or pass --journal)", g.journalPath)}
			}
			key, err := g.journalKey(false)
			if err != nil {
				return nil, err
			}
			return door.OpenStore(g.journalPath, &journal.Options{ReadOnly: true, Key: key})
		}
	case writeJournal:
		o.OpenJournal = func() (journal.Store, error) {
			key, err := g.journalKey(true)
			if err != nil {
				return nil, err
			}
			jo := &journal.Options{Key: key, OnCommit: telemetry.OnCommit,
				Worker: g.worker.Worker, Lease: g.worker.Lease, Serves: g.worker.Serves}
			if testJournalOptions != nil {
				testJournalOptions(jo)
			}
			j, err := door.OpenStore(g.journalPath, jo)
			if err == nil && g.onOpen != nil {
				g.onOpen(svc)
			}
			return j, err
		}
	}
	svc, err := service.New(nil, o)
	if err != nil {
		return nil, nil, err
	}
	return svc, func() { svc.Close() }, nil
}

// backend returns what a command that uses the journal works through, and
// the function that closes it: the server's API when `mcpflow server` owns
// the journal (it answers on the socket beside it), else the service in
// this process, which opens the journal as mode says.
func (g *globals) backend(mode journalMode) (service.API, func(), error) {
	if g.served() {
		if g.serversFile != "" {
			return nil, nil, usageError("--servers does not go through mcpflow server: start the server with --servers %s instead", g.serversFile)
		}
		local, done, err := g.service(noJournal)
		if err != nil {
			return nil, nil, err
		}
		c := client.New(g.socketPath(), local)
		return c, func() { c.Close(); done() }, nil
	}
	svc, done, err := g.service(mode)
	if err != nil {
		return nil, nil, err
	}
	return &service.Local{Service: svc, Shared: journal.IsPostgres(g.journalPath)}, done, nil
}

// served reports whether `mcpflow server` owns the journal: something
// answers GET /api/health on the socket beside it. Asked once a command.
func (g *globals) served() bool {
	if g.serving == nil {
		on := client.On(g.socketPath())
		g.serving = &on
	}
	return *g.serving
}

// exclusive refuses a command that needs the journal to itself (compact,
// prune, salvage) while `mcpflow server` owns it.
func (g *globals) exclusive(command string) error {
	if !g.served() {
		return nil
	}
	if h, _ := client.Probe(g.socketPath()); h.Owner != nil {
		return &exitError{code: exitJournal, err: fmt.Errorf("%s needs the journal to itself, and '%s' (pid %s) holds it: run it again once that command ended", command, h.Owner["command"], h.Owner["pid"])}
	}
	return &exitError{code: exitJournal, err: fmt.Errorf("%s needs the journal to itself, and mcpflow server owns it (socket %s): stop mcpflow server first", command, g.socketPath())}
}

// testJournalOptions, set only by this package's tests, adjusts the
// options of a journal opened for writing (crash tests kill the process
// after a chosen commit).
var testJournalOptions func(*journal.Options)

// journalKey is the key that encrypts journal payloads: MCPFLOW_JOURNAL_KEY,
// or the key file in the user's config directory, created on first use
// when create is set.
func (g *globals) journalKey(create bool) (*journal.Key, error) {
	dir, err := trust.DefaultDir()
	if err != nil && os.Getenv(journal.KeyEnv) == "" {
		if create {
			return nil, fmt.Errorf("journal key: %w (set %s)", err, journal.KeyEnv)
		}
		return nil, nil
	}
	return journal.LoadKey(dir, create)
}

// trustStore is the user's store of trusted workspaces.
func (g *globals) trustStore() *trust.Store { return trust.OpenStore("") }

// printer is the one printer of every command, in the format --output
// chose.
func (g *globals) printer(w io.Writer) printer {
	return printer{w: w, format: g.output, fields: g.fields, jq: g.jq}
}
