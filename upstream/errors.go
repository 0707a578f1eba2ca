package upstream

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownServer: no server of that name is configured.
	ErrUnknownServer = errors.New("unknown server")
	// ErrUnknownTool: the server does not list a tool of that name.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrUnknownResource: the server lists no resource of that URI, and
	// none of its resource templates matches it.
	ErrUnknownResource = errors.New("unknown resource")
	// ErrUnknownPrompt: the server does not list a prompt of that name.
	ErrUnknownPrompt = errors.New("unknown prompt")
	// ErrConfig: a server entry or a servers file is malformed.
	ErrConfig = errors.New("invalid server configuration")
	// ErrUnsetVariable: a ${VAR} reference names an environment variable
	// that is not set and has no ${VAR:-default}.
	ErrUnsetVariable = errors.New("environment variable not set")
	// ErrResultTooLarge: the server answered a call with a message larger
	// than the transport's limit (max_message_size): the tool ran, its
	// result is lost, and sending the call again would fail the same way.
	ErrResultTooLarge = errors.New("result too large")
	// ErrInvalidArgs: tool arguments do not match the tool's input schema.
	ErrInvalidArgs = errors.New("invalid tool arguments")
	// ErrNoSampling: a server asked for sampling and mcpflow has no
	// sampling provider configured (see SamplingRefusal).
	ErrNoSampling = errors.New("mcpflow has no sampling provider configured")
	// ErrUnknownClient: no MCP client of that name is known (see Clients).
	ErrUnknownClient = errors.New("unknown client")
)

// ConfigError is an error in server configuration at a position in a file.
// Every error from [ParseEntry], [LoadWorkspace] and [Import] is a
// *ConfigError; errors.Is(err, ErrConfig) holds for all of them.
type ConfigError struct {
	File   string // "" when the entry did not come from a file
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based, in characters; 0 when unknown
	Server string // the server entry concerned; "" for file-level errors
	Msg    string // what is wrong and, in parentheses, what was expected
}

func (e *ConfigError) Error() string {
	msg := e.Message()
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, msg)
	case e.File != "":
		return e.File + ": " + msg
	}
	return msg
}

// Message is the error without its position: "server NAME: MSG", or MSG
// for file-level errors.
func (e *ConfigError) Message() string {
	if e.Server != "" {
		return "server " + e.Server + ": " + e.Msg
	}
	return e.Msg
}

func (e *ConfigError) Unwrap() error { return ErrConfig }

// ArgsError reports arguments that fail a tool's input schema, or that a
// prompt does not take (Prompt). errors.Is(err, ErrInvalidArgs) holds.
type ArgsError struct {
	// Tool names the tool, or the prompt.
	Tool string
	// Prompt: the arguments are a prompt's.
	Prompt bool
	// Field is the path of the failing argument ("name", "address.zip",
	// "tags[2]"); "" when the arguments as a whole are wrong.
	Field  string
	Reason string
}

func (e *ArgsError) Error() string {
	what := "tool"
	if e.Prompt {
		what = "prompt"
	}
	if e.Field == "" {
		return fmt.Sprintf("%s %s: arguments: %s", what, e.Tool, e.Reason)
	}
	return fmt.Sprintf("%s %s: argument %s: %s", what, e.Tool, e.Field, e.Reason)
}

func (e *ArgsError) Unwrap() error { return ErrInvalidArgs }
