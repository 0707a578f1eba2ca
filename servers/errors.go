package servers

import "errors"

var (
	// ErrUnknownServer: no server of that name is configured.
	ErrUnknownServer = errors.New("unknown server")
	// ErrUnknownTool: the server does not list a tool of that name.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrConfig: a server entry is malformed.
	ErrConfig = errors.New("invalid server configuration")
)
