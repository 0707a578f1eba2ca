package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LogLevel is the least severe MCP log level mcpflow asks servers that
// declare the logging capability to send (notifications/message).
const LogLevel mcp.LoggingLevel = "info"

// newProtocol is the first protocol version on which a request's log level
// travels in its _meta instead of being set once with logging/setLevel.
const newProtocol = "2026-07-28"

// maxLogData bounds the data of one logged message, in bytes.
const maxLogData = 16 << 10

// logDir is where server logs live under a workspace.
func logDir(workspace string) string { return filepath.Join(workspace, ".mcpflow", "logs") }

// openLog opens (creating them 0700 and 0600) the log directory and the log
// file of server name, for appending.
func openLog(workspace, name string) (*os.File, error) {
	dir := logDir(workspace)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server %q: create log directory: %w", name, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, logName(name)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server %q: open log: %w", name, err)
	}
	return f, nil
}

// askForLogs asks a server that declares the logging capability for its
// messages at [LogLevel] and above: with logging/setLevel on protocols
// before 2026-07-28, and on later ones in each tools/call's _meta (see
// [Session.Call]). A server that refuses is noted in its log, not failed.
func (s *Session) askForLogs(ctx context.Context) {
	res := s.cs.InitializeResult()
	if res == nil || res.Capabilities == nil || res.Capabilities.Logging == nil {
		return
	}
	if res.ProtocolVersion >= newProtocol {
		s.logInMeta = true
		return
	}
	if err := s.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: LogLevel}); err != nil {
		s.writeLog(fmt.Sprintf("%s [mcpflow] logging/setLevel %s refused: %s", logTime(time.Now()), LogLevel, oneLine(err.Error())))
	}
}

// logMessage appends a notifications/message to the server's log.
func (s *Session) logMessage(p *mcp.LoggingMessageParams) {
	if p == nil {
		return
	}
	s.writeLog(logLine(time.Now(), p))
}

// logLine is one log notification as a line of the server's log:
//
//	2026-01-02T03:04:05.678Z [info] LOGGER: DATA
//
// DATA is a string as it is, anything else as compact JSON; a string with
// line breaks or other control characters is quoted, so that one message
// is one line. Data over 16 KiB is cut.
func logLine(t time.Time, p *mcp.LoggingMessageParams) string {
	var data string
	switch d := p.Data.(type) {
	case string:
		data = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			b = []byte(fmt.Sprintf("%v", d))
		}
		data = string(b)
	}
	if len(data) > maxLogData {
		data = strings.ToValidUTF8(data[:maxLogData], "") + "…"
	}
	line := logTime(t) + " [" + oneLine(string(p.Level)) + "] "
	if p.Logger != "" {
		line += oneLine(p.Logger) + ": "
	}
	return line + oneLine(data)
}

func logTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// oneLine returns s, quoted if it holds a control character.
func oneLine(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// writeLog appends one line to the server's log.
func (s *Session) writeLog(line string) { s.appendLog([]byte(line + "\n")) }

// appendLog appends b, whole lines, to the server's log in one write,
// opening it on first use for http and sse servers (a stdio server's log
// is open from the start, for its stderr). Log messages and stderr lines
// come through here one at a time, so they never cut into each other.
// After Close it does nothing.
func (s *Session) appendLog(b []byte) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.logClosed {
		return
	}
	if s.log == nil {
		f, err := openLog(s.workspace, s.server.Name)
		if err != nil {
			return // nowhere to write: the message is lost, the session is not
		}
		s.log = f
	}
	s.log.Write(b)
}
