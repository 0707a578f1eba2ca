package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/internal/ndjson"
)

// DefaultMaxMessageSize bounds one JSON-RPC message read from a stdio
// server whose configuration sets no max_message_size. go-sdk's own default
// is 16 MiB.
const DefaultMaxMessageSize = 64 << 20

// stdioTransport runs a command and speaks newline-delimited JSON-RPC over
// its stdin and stdout, like go-sdk's CommandTransport, with a configurable
// bound on one inbound message (go-sdk's is fixed at 16 MiB for commands),
// through ndjson's connection, which decodes messages with less garbage.
type stdioTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
	maxSize   int
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: t.cmd, stdin: stdin, terminate: t.terminate}
	return (&ndjson.Transport{Reader: stdout, Writer: p, MaxLineLength: t.maxSize}).Connect(ctx)
}

// killAfter is how long a stdio server has after SIGTERM before SIGKILL.
const killAfter = 2 * time.Second

// process is the server's stdin; closing it ends the process as the MCP
// specification says: close its input, wait (briefly: a server that ignores
// the end of its input must not hold mcpflow up), SIGTERM, wait, SIGKILL.
type process struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	if err := p.stdin.Close(); err != nil {
		return fmt.Errorf("closing stdin: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-done:
			return err, true
		case <-time.After(p.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		// Longer: a supervisor ends its server's process group within
		// superviseGrace of its SIGTERM.
		p.terminate = killAfter
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("unresponsive subprocess")
}

// frameTooLarge reports whether err is the refusal of an inbound message
// longer than the transport's limit: ndjson's, or go-sdk's (its error is
// unexported; its text, which ndjson's repeats, is stable in v1.8.0).
func frameTooLarge(err error) bool {
	return errors.Is(err, ndjson.ErrFrameTooLarge) || err != nil && strings.Contains(err.Error(), ndjson.ErrFrameTooLarge.Error())
}
