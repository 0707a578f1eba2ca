package servers

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Server is one configured MCP server, shaped like the mcpServers entries of
// other MCP clients.
type Server struct {
	// Name is the key the server is configured under.
	Name string `yaml:"-" json:"name"`
	// Builtin names a server built into mcpflow ("demo"), started as a stdio
	// subprocess of mcpflow's own executable.
	Builtin string `yaml:"builtin,omitempty" json:"builtin,omitempty"`
	// Command, Args, Env and Cwd start a stdio server.
	Command string            `yaml:"command,omitempty" json:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Cwd     string            `yaml:"cwd,omitempty" json:"cwd,omitempty"`
	// Trust opts the server into automatic replay of calls that its tools
	// declare safe. Default false.
	Trust bool `yaml:"trust,omitempty" json:"trust"`
	// ConnectTimeout bounds starting and initializing the session.
	ConnectTimeout time.Duration `yaml:"connect_timeout,omitempty" json:"connect_timeout,omitempty"`
}

// Transport names how the server is reached.
func (s *Server) Transport() string {
	return "stdio"
}

// Validate checks that the entry says how to start the server.
func (s *Server) Validate() error {
	switch {
	case s.Builtin != "" && s.Command != "":
		return fmt.Errorf("server %q: set either builtin or command, not both: %w", s.Name, ErrConfig)
	case s.Builtin != "" && s.Builtin != "demo":
		return fmt.Errorf("server %q: unknown builtin %q (the built-in server is \"demo\"): %w", s.Name, s.Builtin, ErrConfig)
	case s.Builtin == "" && s.Command == "":
		return fmt.Errorf("server %q: needs builtin: demo or a command: %w", s.Name, ErrConfig)
	}
	return nil
}

// Set is the servers a workflow can use, by name.
type Set map[string]*Server

// Names lists the configured names in order.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the named server or an error naming the ones that exist.
func (s Set) Lookup(name string) (*Server, error) {
	if srv, ok := s[name]; ok {
		return srv, nil
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("%w %q: no servers are configured", ErrUnknownServer, name)
	}
	return nil, fmt.Errorf("%w %q (configured: %s)", ErrUnknownServer, name, strings.Join(s.Names(), ", "))
}
