package upstream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/mcpflow/mcpflow/internal/yamlpos"
)

// SamplingOpenAICompatible is the provider of an OpenAI-compatible
// chat-completions API (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).
const SamplingOpenAICompatible = "openai-compatible"

// SamplingProviders are the values sampling.provider accepts.
var SamplingProviders = []string{SamplingOpenAICompatible}

// samplingKeys are the keys of the sampling: section.
var samplingKeys = []string{"provider", "base_url", "model", "api_key", "approve", "timeout"}

// Sampling is the sampling: section of the workspace's mcpflow.yaml: the
// language model that answers the sampling/createMessage requests of MCP
// servers.
//
//	sampling:
//	  provider: openai-compatible          # the only one so far
//	  base_url: http://localhost:11434/v1  # where /chat/completions follows
//	  model: llama3.2
//	  api_key: ${OPENAI_API_KEY}           # optional: a local server needs none
//	  approve: true                        # optional: an operator approves each request
//	  timeout: 2m                          # optional: bounds each request
//
// Without the section, mcpflow declares no sampling capability and refuses
// a server that asks anyway. base_url, model and api_key may refer to the
// environment as ${VAR} or ${VAR:-default}, expanded by [Sampling.Expand]
// when a run needs them, never when the file is read: a Sampling read from
// the file holds no secret of the environment. Only the workspace's
// mcpflow.yaml configures sampling; an imported file or a --servers file
// that has the key is an error.
type Sampling struct {
	// Provider is the kind of API: SamplingOpenAICompatible.
	Provider string
	// BaseURL is the root of the API, the URL /chat/completions follows.
	BaseURL string
	// Model is the model every request asks for, whatever the server's
	// model preferences.
	Model string
	// APIKey goes to BaseURL as a bearer token; "" sends none.
	APIKey string
	// Approve makes each request wait for an operator's approval.
	Approve bool
	// Timeout bounds each request; 0 means the provider's default.
	Timeout time.Duration
	// Origin is where the section was read, "FILE:LINE:COL".
	Origin string
	// places says where each value that may refer to a variable was read,
	// FILE:LINE:COL, by key: "base_url", "model", "api_key".
	places map[string]string
	// line and column are Origin's, for errors about the section itself.
	line, column int
}

// Expand returns a copy whose base_url, model and api_key have their
// ${VAR} references expanded by lookup (os.LookupEnv for the process's
// environment). An unset variable without a default is an error wrapping
// ErrUnsetVariable, led by where the value was read:
//
//	FILE:LINE:COL: sampling.api_key: ${NAME}: environment variable not set (expected …)
//
// The copy holds the secrets: give it to the provider, and show the
// original.
func (s *Sampling) Expand(lookup func(string) (string, bool)) (*Sampling, error) {
	c := *s
	for _, f := range []struct {
		key string
		v   *string
	}{{"base_url", &c.BaseURL}, {"model", &c.Model}, {"api_key", &c.APIKey}} {
		out, err := expandVars(*f.v, lookup)
		if err != nil {
			if at := s.places[f.key]; at != "" {
				return nil, fmt.Errorf("%s: sampling.%s: %w", at, f.key, err)
			}
			return nil, fmt.Errorf("sampling.%s: %w", f.key, err)
		}
		*f.v = out
	}
	if c.BaseURL != s.BaseURL {
		msg := checkSamplingURL(c.BaseURL)
		if msg == "" && strings.Contains(c.BaseURL, "${") {
			msg = "still holds ${ after expansion (expected an http:// or https:// URL)"
		}
		if msg != "" {
			return nil, fmt.Errorf("%s: sampling.base_url: %s expands to a value that %s", s.places["base_url"], s.BaseURL, strings.TrimPrefix(msg, "url "))
		}
	}
	return &c, nil
}

// String shows the section without its key: an api_key made only of
// ${VAR} references is shown as written, any other as <redacted>.
func (s *Sampling) String() string {
	key := s.APIKey
	if !onlyVars(key) {
		key = "<redacted>"
	}
	return fmt.Sprintf("sampling{provider: %s, base_url: %s, model: %s, api_key: %s, approve: %t, timeout: %s}",
		s.Provider, s.BaseURL, s.Model, key, s.Approve, s.Timeout)
}

// GoString is String, so that %#v shows no key either.
func (s *Sampling) GoString() string { return s.String() }

// parseSampling reads the sampling: section at n, strictly.
func (p *yamlParser) parseSampling(n *yaml.Node) (*Sampling, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errAt(n, "sampling: expected a mapping with provider, base_url and model, found %s", yamlpos.KindName(n))
	}
	fields, keys, err := p.fields(n, samplingKeys)
	if err != nil {
		if ce, ok := err.(*ConfigError); ok {
			ce.Msg = "sampling: " + ce.Msg
		}
		return nil, err
	}
	s := &Sampling{Origin: position(p.file, n), line: n.Line, column: n.Column}
	for _, k := range keys {
		v := fields[k]
		what := "sampling." + k
		switch k {
		case "provider":
			s.Provider, err = p.str(v, what)
		case "base_url":
			s.BaseURL, err = p.str(v, what)
		case "model":
			s.Model, err = p.str(v, what)
		case "api_key":
			s.APIKey, err = p.str(v, what)
		case "approve":
			s.Approve, err = p.boolean(v, what)
		case "timeout":
			s.Timeout, err = p.duration(v, what)
		}
		if err != nil {
			return nil, err
		}
		switch k {
		case "base_url", "model", "api_key":
			if s.places == nil {
				s.places = map[string]string{}
			}
			s.places[k] = position(p.file, v)
			if err := checkVars(v.Value); err != nil {
				return nil, p.errAt(v, "%s: %v", what, err)
			}
		}
	}
	need := func(key, example string) error {
		return p.errAt(n, "sampling: missing %s (expected %s)", key, example)
	}
	switch {
	case fields["provider"] == nil:
		return nil, need("provider", "provider: "+strings.Join(SamplingProviders, " or "))
	case !slices.Contains(SamplingProviders, s.Provider):
		return nil, p.errAt(fields["provider"], "sampling.provider: unknown provider %q (supported: %s)", s.Provider, strings.Join(SamplingProviders, ", "))
	case fields["base_url"] == nil:
		return nil, need("base_url", "the API's root, such as base_url: http://localhost:11434/v1")
	case fields["model"] == nil:
		return nil, need("model", "the model to ask, such as model: llama3.2")
	case s.Model == "":
		return nil, p.errAt(fields["model"], "sampling.model: empty (expected the model to ask, such as llama3.2)")
	}
	if msg := checkSamplingURL(s.BaseURL); msg != "" {
		return nil, p.errAt(fields["base_url"], "sampling.base_url: %s", msg)
	}
	return s, nil
}

// checkSamplingURL accepts an http or https URL with a host and no query,
// fragment or user information, or one with ${VAR} references after the
// scheme.
func checkSamplingURL(raw string) string {
	if strings.HasPrefix(raw, "${") {
		return "" // the whole URL may come from a variable: Expand checks it
	}
	if msg := checkURL(raw); msg != "" {
		return strings.Replace(msg, "such as https://example.com/mcp", "such as http://localhost:11434/v1", 1)
	}
	if strings.Contains(raw, "${") {
		return ""
	}
	if strings.ContainsAny(raw, "?#") {
		return "has a query or a fragment (expected none: /chat/completions is added to its path)"
	}
	if strings.Contains(raw[strings.Index(raw, "://")+3:], "@") {
		return "holds a user name or password (expected the key in api_key)"
	}
	return ""
}

// notHere is the error for a sampling: section in a file that is not the
// workspace's mcpflow.yaml (an imported file, a --servers file).
func (s *Sampling) notHere(file string) *ConfigError {
	return &ConfigError{File: file, Line: s.line, Column: s.column,
		Msg: "sampling: only the workspace's " + WorkspaceFile + " configures sampling (expected servers: only in this file)"}
}

// The methods of what a server asks of mcpflow, besides elicitation
// (package elicit): a sampling request, and a request for its roots.
const (
	MethodCreateMessage = "sampling/createMessage"
	MethodListRoots     = "roots/list"
)

// CodeSamplingRefused is the JSON-RPC error code of SamplingRefusal: the
// one the MCP specification gives a client that declines a sampling
// request ("User rejected sampling request"). Not -32601 "method not
// found": go-sdk replaces the message of such an error with its own, on
// both ends, and the reason would be lost.
const CodeSamplingRefused = -1

// SamplingRefusal is what a session without a sampling provider answers
// a server that asks for sampling anyway: a JSON-RPC error
// (CodeSamplingRefused) whose message says what to configure.
// errors.Is(err, ErrNoSampling) holds.
func SamplingRefusal() error {
	return &samplingRefusal{&jsonrpc.Error{
		Code:    CodeSamplingRefused,
		Message: ErrNoSampling.Error() + " (expected a sampling: section in the workspace's " + WorkspaceFile + ", such as sampling: {provider: openai-compatible, base_url: http://localhost:11434/v1, model: llama3.2})",
	}}
}

// samplingRefusal is the refusal's *jsonrpc.Error (go-sdk sends its code
// and this message), and ErrNoSampling for errors.Is.
type samplingRefusal struct{ rpc *jsonrpc.Error }

func (r *samplingRefusal) Error() string   { return r.rpc.Message }
func (r *samplingRefusal) Unwrap() []error { return []error{r.rpc, ErrNoSampling} }

// refuseSampling is receiving middleware that answers sampling/createMessage
// with SamplingRefusal instead of go-sdk's "client does not support
// CreateMessage" (code -31001).
func refuseSampling(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == MethodCreateMessage {
			return nil, SamplingRefusal()
		}
		return next(ctx, method, req)
	}
}
