package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpflow/mcpflow/internal/didyoumean"
	mcpmeta "github.com/mcpflow/mcpflow/internal/meta"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource is a resource a server lists.
type Resource struct {
	URI         string
	Name        string
	Title       string
	Description string
	MIMEType    string
	// Size is the size in bytes the server gives, 0 when it gives none.
	Size int64
}

// ResourceTemplate is a resource template a server lists: an RFC 6570
// URI template the URIs of its resources match.
type ResourceTemplate struct {
	URITemplate string
	Name        string
	Title       string
	Description string
	MIMEType    string
}

// Matches reports whether uri is one of the template's URIs. A template
// that does not parse matches nothing.
func (t ResourceTemplate) Matches(uri string) bool {
	tmpl, err := uritemplate.New(t.URITemplate)
	if err != nil {
		return false
	}
	return tmpl.Regexp().MatchString(uri)
}

// Prompt is a prompt a server lists.
type Prompt struct {
	Name        string
	Title       string
	Description string
	Arguments   []PromptArgument
}

// PromptArgument is an argument a prompt takes.
type PromptArgument struct {
	Name        string
	Title       string
	Description string
	Required    bool
}

// Resources lists the server's resources and resource templates,
// following pagination, resources by URI and templates by their template.
// A server that does not declare the resources capability has none: it is
// not asked.
func (s *Session) Resources(ctx context.Context) ([]Resource, []ResourceTemplate, error) {
	if c := s.capabilities(); c == nil || c.Resources == nil {
		return nil, nil, nil
	}
	var out []Resource
	for r, err := range s.cs.Resources(ctx, nil) {
		if err != nil {
			return nil, nil, fmt.Errorf("list resources of server %q: %w", s.server.Name, err)
		}
		out = append(out, Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType, Size: r.Size})
	}
	var templates []ResourceTemplate
	for t, err := range s.cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			return nil, nil, fmt.Errorf("list resource templates of server %q: %w", s.server.Name, err)
		}
		templates = append(templates, ResourceTemplate{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType})
	}
	slices.SortFunc(out, func(a, b Resource) int { return strings.Compare(a.URI, b.URI) })
	slices.SortFunc(templates, func(a, b ResourceTemplate) int { return strings.Compare(a.URITemplate, b.URITemplate) })
	return out, templates, nil
}

// Prompts lists the server's prompts, following pagination, by name. A
// server that does not declare the prompts capability has none: it is not
// asked.
func (s *Session) Prompts(ctx context.Context) ([]Prompt, error) {
	if c := s.capabilities(); c == nil || c.Prompts == nil {
		return nil, nil
	}
	var out []Prompt
	for p, err := range s.cs.Prompts(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list prompts of server %q: %w", s.server.Name, err)
		}
		prompt := Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			if a != nil {
				prompt.Arguments = append(prompt.Arguments, PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
			}
		}
		out = append(out, prompt)
	}
	slices.SortFunc(out, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Session) capabilities() *mcp.ServerCapabilities {
	if res := s.cs.InitializeResult(); res != nil {
		return res.Capabilities
	}
	return nil
}

// CheckResource reports whether the server has the resource uri: one it
// lists, or one of a template's URIs. Otherwise the error wraps
// ErrUnknownResource and names the resources and templates it has (and the
// one likely meant, for a typo).
func (s *Session) CheckResource(ctx context.Context, uri string) error {
	resources, templates, err := s.Resources(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, r := range resources {
		if r.URI == uri {
			return nil
		}
		names = append(names, r.URI)
	}
	for _, t := range templates {
		if t.Matches(uri) {
			return nil
		}
		names = append(names, t.URITemplate)
	}
	if len(names) == 0 {
		return fmt.Errorf("%w %q on server %q (it lists no resources)", ErrUnknownResource, uri, s.server.Name)
	}
	if guess := didyoumean.Closest(uri, names); guess != "" {
		return fmt.Errorf("%w %q on server %q (did you mean %q? it has: %s)", ErrUnknownResource, uri, s.server.Name, guess, strings.Join(names, ", "))
	}
	return fmt.Errorf("%w %q on server %q (it has: %s)", ErrUnknownResource, uri, s.server.Name, strings.Join(names, ", "))
}

// Prompt returns one prompt, or an error wrapping ErrUnknownPrompt naming
// the prompts that exist (and the one likely meant, for a typo).
func (s *Session) Prompt(ctx context.Context, name string) (Prompt, error) {
	prompts, err := s.Prompts(ctx)
	if err != nil {
		return Prompt{}, err
	}
	names := make([]string, len(prompts))
	for i, p := range prompts {
		if p.Name == name {
			return p, nil
		}
		names[i] = p.Name
	}
	if len(names) == 0 {
		return Prompt{}, fmt.Errorf("%w %q on server %q (it lists no prompts)", ErrUnknownPrompt, name, s.server.Name)
	}
	if guess := didyoumean.Closest(name, names); guess != "" {
		return Prompt{}, fmt.Errorf("%w %q on server %q (did you mean %q? it has: %s)", ErrUnknownPrompt, name, s.server.Name, guess, strings.Join(names, ", "))
	}
	return Prompt{}, fmt.Errorf("%w %q on server %q (it has: %s)", ErrUnknownPrompt, name, s.server.Name, strings.Join(names, ", "))
}

// CheckArguments checks the names of the arguments given to the prompt:
// every required one is given, and no other than those it takes. The error
// is an *ArgsError naming the prompt and the argument (never its value).
func (p Prompt) CheckArguments(given []string) error {
	takes := make([]string, len(p.Arguments))
	for i, a := range p.Arguments {
		takes[i] = a.Name
		if a.Required && !slices.Contains(given, a.Name) {
			return &ArgsError{Tool: p.Name, Prompt: true, Field: a.Name, Reason: "missing (required)"}
		}
	}
	for _, g := range slices.Sorted(slices.Values(given)) {
		if slices.Contains(takes, g) {
			continue
		}
		reason := "not an argument of the prompt"
		switch guess := didyoumean.Closest(g, takes); {
		case guess != "":
			reason += fmt.Sprintf(" (did you mean %q?)", guess)
		case len(takes) == 0:
			reason += " (it takes none)"
		default:
			reason += " (it takes: " + strings.Join(takes, ", ") + ")"
		}
		return &ArgsError{Tool: p.Name, Prompt: true, Field: g, Reason: reason}
	}
	return nil
}

// ReadResource sends one resources/read of uri. meta is attached as _meta
// (with the log level, as Call does); the server's CallTimeout bounds it.
// A read changes nothing on the server: sending it again is always safe.
func (s *Session) ReadResource(ctx context.Context, uri string, meta map[string]any) (*mcp.ReadResourceResult, error) {
	s.inflight.Add(1) // a request in flight, as a call is (InFlight, askerNow)
	defer s.callDone()
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	res, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri, Meta: s.requestMeta(meta)})
	if err == nil && res.NeedsInput() {
		return nil, errReadNeedsInput("resources/read")
	}
	return res, s.ended(ctx, err)
}

// errReadNeedsInput: a server answered a read with input_required (MCP
// multi-round-trip requests), which mcpflow answers for tool calls only:
// the server did not serve the read, so it is a rejection (not run),
// never a read with no contents.
func errReadNeedsInput(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the server asked for input to answer " + method + " (input_required); mcpflow answers input requests for tool calls only"}
}

// GetPrompt sends one prompts/get of the prompt name with args. meta is
// attached as _meta (with the log level, as Call does); the server's
// CallTimeout bounds it.
func (s *Session) GetPrompt(ctx context.Context, name string, args map[string]string, meta map[string]any) (*mcp.GetPromptResult, error) {
	s.inflight.Add(1) // a request in flight, as a call is (InFlight, askerNow)
	defer s.callDone()
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	res, err := s.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args, Meta: s.requestMeta(meta)})
	if err == nil && res.NeedsInput() {
		return nil, errReadNeedsInput("prompts/get")
	}
	return res, s.ended(ctx, err)
}

// ReadsSent is the number of resources/read and prompts/get requests this
// session wrote to the wire.
func (s *Session) ReadsSent() int64 { return s.tap.reads.Load() }

// requestMeta is meta with the log level asked for, on a server that logs
// under protocol 2026-07-28 (see askForLogs).
func (s *Session) requestMeta(meta map[string]any) map[string]any {
	if !s.logInMeta {
		return meta
	}
	m := make(map[string]any, len(meta)+1)
	maps.Copy(m, meta)
	m[mcpmeta.LogLevel] = LogLevel
	return m
}

// callContext is ctx bounded by the server's CallTimeout, if it has one.
func (s *Session) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if t := s.server.CallTimeout; t > 0 {
		return context.WithTimeout(ctx, t)
	}
	return ctx, func() {}
}

// ended is err, the error of a read or a prompt request: as Call does, a
// request that ended with its context is owed its notifications/cancelled
// (go-sdk writes it after returning; Close waits for it), and an answer
// over the transport's limit is ErrResultTooLarge.
func (s *Session) ended(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		s.tap.owe()
	}
	if err != nil && s.tap.tooLarge.Load() {
		return fmt.Errorf("%w: server %q answered with a message larger than %s (raise max_message_size on the server): %v", ErrResultTooLarge, s.server.Name, sizeText(s.server.maxMessageSize()), err)
	}
	return err
}
