package workflow

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpflow/mcpflow/upstream"
)

// ProxyPrefix begins the name of the run of a proxy session: proxy:SERVER.
const ProxyPrefix = "proxy:"

// ProxySource is the source of a proxy session's run: it was not read from
// a file.
const ProxySource = "mcpflow proxy"

// ProxyProcess is the input of a proxy session's run that names the
// process running it (internal/procid): while it runs, the session is
// its, and nothing else settles the run.
const ProxyProcess = "process"

// ProxyCall is one tools/call a client made through mcpflow proxy: a step
// of the session's run.
type ProxyCall struct {
	// Step is the step's id: call-N, N counting the session's calls.
	Step string
	Tool string
	// Args are the arguments as the client sent them.
	Args json.RawMessage
}

// Proxy is the workflow of a proxy session (mcpflow proxy SERVER): a run
// whose steps are the calls a client makes, each added as it comes
// (calls), so that resume finds every step the journal holds. Its inputs
// are the client's name and version, and the process that runs it
// (ProxyProcess). Its Source says what it is; it names
// the server without copying its entry, like Call.
func Proxy(server string, set upstream.Set, calls []ProxyCall) (*Workflow, error) {
	if _, err := set.Lookup(server); err != nil {
		return nil, err
	}
	name := ProxyPrefix + server
	wf := &Workflow{
		Name: name, Servers: upstream.Merge(set), Own: upstream.Set{},
		Inputs: []*Input{{Name: "client", Type: TypeString}, {Name: "client_version", Type: TypeString}, {Name: ProxyProcess, Type: TypeString}},
		Path:   ProxySource,
		Source: []byte(fmt.Sprintf("# The calls a client made through mcpflow proxy %s: each tools/call is one step.\nname: %q\nproxy: %q\n", server, name, server)),
	}
	for _, c := range calls {
		wf.Steps = append(wf.Steps, ProxyStep(c, server))
	}
	return wf, nil
}

// ProxyStep is the step of one call through the proxy of server: sent once
// (no retry); a lost connection is judged by the replay rule like any
// step's. A call that failed was answered to the client, and the session
// went on: on resume, so do the steps after it.
func ProxyStep(c ProxyCall, server string) *Step {
	return &Step{ID: c.Step, Server: server, Tool: c.Tool, Args: c.Args, Concurrency: 1, Retry: Retry{Attempts: 1}, ContinueOnError: true}
}

// ProxyServer is the server a proxy session's run stands in front of, for
// a run of workflow name read from source; false for any other run.
func ProxyServer(name, source string) (string, bool) {
	server, ok := strings.CutPrefix(name, ProxyPrefix)
	return server, ok && source == ProxySource && server != ""
}
