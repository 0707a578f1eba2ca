package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The client-metadata URL the suite's authorization servers expect as
// client_id where they support client ID metadata documents.
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// maxLogins bounds the logins of one scenario: auth/scope-retry-limit
// wants no more than three authorization requests from a client that the
// server keeps refusing for want of scopes.
const maxLogins = 3

// stepTimeout bounds each workflow step, well under the suite's own
// timeout, so that a call that never ends fails the scenario with
// mcpflow's own message instead of the suite's kill.
const stepTimeout = "20s"

// scenarioContext is MCP_CONFORMANCE_CONTEXT: the credentials of a client
// registered beforehand, for the scenarios that have one.
type scenarioContext struct {
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
}

// driverMain is the client the suite runs for one scenario
// (MCP_CONFORMANCE_SCENARIO): args ends with the test server's URL. It
// exits with the last mcpflow command's exit code, or 1 when it could not
// drive the scenario.
func driverMain(args []string) int {
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	if len(args) == 0 || scenario == "" {
		fmt.Fprintln(os.Stderr, "driver: want the server URL as last argument and MCP_CONFORMANCE_SCENARIO set")
		return 2
	}
	// The suite kills the client at its timeout: mcpflow is told to stop
	// too, and has a moment to, rather than outliving the scenario.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d, err := newDriver(ctx, args[len(args)-1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		return 1
	}
	defer os.RemoveAll(d.dir)
	code, err := d.drive(scenario)
	if err != nil {
		fmt.Fprintf(os.Stderr, "driver: %s: %v\n", scenario, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// driver runs mcpflow in a workspace of its own whose mcpflow.yaml names
// the scenario's server conf.
type driver struct {
	ctx     context.Context
	url     string
	dir     string // the workspace; its config/ is XDG_CONFIG_HOME
	mcpflow string
	self    string
	env     []string // for mcpflow, besides the driver's own
	logins  int
}

func newDriver(ctx context.Context, url string) (*driver, error) {
	bin := os.Getenv(mcpflowEnv)
	if bin == "" {
		return nil, fmt.Errorf("%s is not set (the mcpflow binary to run)", mcpflowEnv)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mcpflow-conformance-client")
	if err != nil {
		return nil, err
	}
	return &driver{ctx: ctx, url: url, dir: dir, mcpflow: bin, self: self}, nil
}

// drive does what the scenario asks of a client, with mcpflow's commands.
func (d *driver) drive(scenario string) (int, error) {
	switch {
	case scenario == "initialize":
		// Initialize and list the tools: mcpflow servers tools. It only
		// reaches servers of a trusted workspace.
		if err := d.config(""); err != nil {
			return 1, err
		}
		code, _, err := d.run("servers", "tools", "conf", "--trust-workspace")
		return code, err
	case scenario == "tools_call":
		return d.workflow("", "add_numbers", "    with: {a: 2, b: 3}\n")
	case scenario == "sse-retry":
		return d.workflow("", "test_reconnection", "")
	case scenario == "elicitation-sep1034-client-defaults":
		// The step accepts the server's question without fields of its
		// own: the schema's defaults are the answer (SEP-1034).
		return d.workflow("", "test_client_elicitation_defaults", "    elicit: {}\n")
	case strings.HasPrefix(scenario, "auth/cross-app-access"):
		return 1, errors.New("mcpflow has no grant for cross-app access (an identity provider's ID token exchanged for an authorization grant, RFC 8693 and the ID-JAG draft)")
	case strings.HasPrefix(scenario, "auth/client-credentials-"):
		oauth, err := d.preRegistered(true)
		if err != nil {
			return 1, err
		}
		return d.workflow(oauth, "test-tool", "")
	case strings.HasPrefix(scenario, "auth/"):
		return d.authorizationCode(scenario)
	}
	return 2, fmt.Errorf("the driver does not know this scenario")
}

// authorizationCode logs in, runs the workflow and, while the run is
// blocked on a login (a token with too few scopes: step-up), logs in again
// and resumes it, at most maxLogins logins in all.
func (d *driver) authorizationCode(scenario string) (int, error) {
	oauth := "    oauth:\n      client_metadata_url: " + clientMetadataURL + "\n"
	if os.Getenv("MCP_CONFORMANCE_CONTEXT") != "" {
		var err error
		if oauth, err = d.preRegistered(false); err != nil {
			return 1, err
		}
	}
	if err := d.config(oauth); err != nil {
		return 1, err
	}
	wf, err := d.writeWorkflow("test-tool", "")
	if err != nil {
		return 1, err
	}
	if code, err := d.login(); code != 0 || err != nil {
		return code, err
	}
	code, out, err := d.run("run", wf)
	for err == nil && code == 3 && strings.Contains(out, "mcpflow servers login conf") {
		if d.logins >= maxLogins {
			return code, fmt.Errorf("the run is still blocked on a login after %d logins", d.logins)
		}
		id := runID.FindStringSubmatch(out)
		if id == nil {
			return code, errors.New("the blocked run's output names no run id")
		}
		if code, err := d.login(); code != 0 || err != nil {
			return code, err
		}
		code, out, err = d.run("resume", id[1])
	}
	return code, err
}

// runID finds the run id in what mcpflow run and resume print.
var runID = regexp.MustCompile(`\brun ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b`)

func (d *driver) login() (int, error) {
	d.logins++
	// A login reaches only the servers of a trusted workspace.
	code, _, err := d.run("servers", "login", "conf", "--trust-workspace")
	return code, err
}

// preRegistered is the oauth: mapping of the client MCP_CONFORMANCE_CONTEXT
// describes, with the client_credentials grant or the default one. A
// private key goes to a file of the workspace (0600) that the mapping
// names.
func (d *driver) preRegistered(clientCredentials bool) (string, error) {
	var c scenarioContext
	if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &c); err != nil {
		return "", fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
	}
	var b strings.Builder
	b.WriteString("    oauth:\n")
	if clientCredentials {
		b.WriteString("      grant: client_credentials\n")
	}
	fmt.Fprintf(&b, "      client_id: %s\n", strconv.Quote(c.ClientID))
	if c.ClientSecret != "" {
		// A secret stays out of files, as mcpflow asks: the entry refers
		// to the environment.
		b.WriteString("      client_secret: ${CONFORMANCE_CLIENT_SECRET}\n")
		d.env = append(d.env, "CONFORMANCE_CLIENT_SECRET="+c.ClientSecret)
	}
	if c.PrivateKeyPEM != "" {
		key := filepath.Join(d.dir, "client-key.pem")
		if err := os.WriteFile(key, []byte(c.PrivateKeyPEM), 0o600); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "      private_key: %s\n", strconv.Quote(key))
		if c.SigningAlgorithm != "" {
			fmt.Fprintf(&b, "      signing_alg: %s\n", c.SigningAlgorithm)
		}
	}
	return b.String(), nil
}

// config writes the workspace's mcpflow.yaml: the server conf at the
// scenario's URL, with extra lines of its entry (an oauth: mapping).
func (d *driver) config(extra string) error {
	yaml := fmt.Sprintf("servers:\n  conf:\n    url: %s\n%s", strconv.Quote(d.url), extra)
	return os.WriteFile(filepath.Join(d.dir, "mcpflow.yaml"), []byte(yaml), 0o600)
}

// workflow writes the configuration and a workflow of one step calling
// tool, then runs it.
func (d *driver) workflow(oauth, tool, step string) (int, error) {
	if err := d.config(oauth); err != nil {
		return 1, err
	}
	wf, err := d.writeWorkflow(tool, step)
	if err != nil {
		return 1, err
	}
	code, _, err := d.run("run", wf)
	return code, err
}

// writeWorkflow writes a workflow of one step calling tool on conf, with
// the step's further lines, and returns its path.
func (d *driver) writeWorkflow(tool, step string) (string, error) {
	timeout := stepTimeout
	if tool == "test_client_elicitation_defaults" {
		timeout = "5s" // the question comes at once, or not at all
	}
	wf := fmt.Sprintf("name: conformance\nsteps:\n  - id: call\n    server: conf\n    tool: %s\n    timeout: %s\n%s", tool, timeout, step)
	path := filepath.Join(d.dir, "conformance.yaml")
	return path, os.WriteFile(path, []byte(wf), 0o600)
}

// run runs mcpflow in the workspace, its output going to the driver's
// own (which the suite keeps), and returns its exit code and output. An
// error means it could not run or did not exit by itself.
func (d *driver) run(args ...string) (int, string, error) {
	fmt.Fprintf(os.Stderr, "driver: mcpflow %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(d.ctx, d.mcpflow, append([]string{"--workspace", d.dir}, args...)...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "XDG_CONFIG_HOME="+filepath.Join(d.dir, "config"),
		"BROWSER="+d.self, browserEnv+"=1")
	cmd.Env = append(cmd.Env, d.env...)
	out := &lockedBuffer{}
	cmd.Stdout = io.MultiWriter(os.Stdout, out)
	cmd.Stderr = io.MultiWriter(os.Stderr, out)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 3 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Exited() && d.ctx.Err() == nil {
		return exit.ExitCode(), out.String(), nil
	}
	if err != nil {
		return 1, out.String(), fmt.Errorf("mcpflow %s: %w", strings.Join(args, " "), err)
	}
	return 0, out.String(), nil
}

// lockedBuffer is a buffer two copying goroutines (stdout's, stderr's)
// write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// browserMain is the browser mcpflow servers login opens ($BROWSER URL):
// it follows the authorization server's redirects, the last of which
// brings the code and state to mcpflow's loopback listener.
func browserMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "browser: want a URL")
		return 2
	}
	u := args[len(args)-1]
	fmt.Fprintf(os.Stderr, "browser: GET %s\n", u)
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		fmt.Fprintln(os.Stderr, "browser:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(os.Stderr, "browser: %s from %s: %s\n", resp.Status, resp.Request.URL.Redacted(), bytes.TrimSpace(body))
	if resp.StatusCode >= 400 {
		return 1
	}
	return 0
}
