package sampling

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"
)

// DefaultTimeout bounds a request when Options.Timeout is 0: a local model
// on a CPU can take minutes to write a long answer.
const DefaultTimeout = 5 * time.Minute

// MaxReplySize bounds the body of the provider's reply, in bytes.
const MaxReplySize = 16 << 20

// replyLimit is MaxReplySize; tests lower it.
var replyLimit int64 = MaxReplySize

// Options configure New. BaseURL and Model are required.
type Options struct {
	// BaseURL is the root of the API, the URL that /chat/completions
	// follows: "http://localhost:11434/v1" (Ollama),
	// "http://localhost:8000/v1" (vLLM), "https://api.openai.com/v1". It
	// is http or https, with a host and no query or fragment.
	BaseURL string
	// Model is the model every request asks for.
	Model string
	// APIKey is sent as "Authorization: Bearer KEY" to BaseURL only; ""
	// sends no Authorization header. Nothing is read from the environment
	// (not OPENAI_API_KEY either): the caller decides.
	APIKey string
	// Timeout bounds each request, from sending it to reading the whole
	// reply; 0 means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient's Transport sends the requests (nil: the client of
	// http.DefaultTransport). Its CheckRedirect and Timeout are not used:
	// a redirect is an error, and Timeout bounds a request.
	HTTPClient *http.Client
}

// Provider answers sampling requests with one chat-completions API and one
// model. It is safe for concurrent use and holds no connection of its own
// (it shares its HTTP client's), so it needs no closing.
type Provider struct {
	model   string
	host    string // BaseURL's host, for errors
	timeout time.Duration
	client  *openai.Client
}

// New checks the options and returns a provider. Errors wrap ErrOptions;
// they never hold the API key.
func New(o *Options) (*Provider, error) {
	if o == nil {
		return nil, fmt.Errorf("%w: no options (expected a base URL and a model)", ErrOptions)
	}
	u, err := checkBaseURL(o.BaseURL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.Model) == "" {
		return nil, fmt.Errorf("%w: no model (expected the name the API knows it by, such as llama3.2 or gpt-4o-mini)", ErrOptions)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout %s (expected a positive duration, or 0 for %s)", ErrOptions, o.Timeout, DefaultTimeout)
	}
	if strings.ContainsAny(o.APIKey, "\r\n") {
		return nil, fmt.Errorf("%w: the API key holds a line break (expected one line)", ErrOptions)
	}
	p := &Provider{model: o.Model, host: u.Host, timeout: o.Timeout}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	rt := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		rt = o.HTTPClient.Transport
	}
	cfg := openai.DefaultConfig(o.APIKey)
	cfg.BaseURL = strings.TrimRight(o.BaseURL, "/")
	cfg.HTTPClient = &http.Client{
		Transport: limitedReplies{rt},
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			// A 307 or 308 would send the prompt, and the key to the same
			// host, a second time: the base URL should be the final one.
			return fmt.Errorf("redirected to %s (expected base_url to be where the API answers)", req.URL.Redacted())
		},
	}
	p.client = openai.NewClientWithConfig(cfg)
	return p, nil
}

func checkBaseURL(raw string) (*url.URL, error) {
	const want = "expected an http:// or https:// URL such as http://localhost:11434/v1"
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return nil, fmt.Errorf("%w: no base URL (%s)", ErrOptions, want)
	case err != nil:
		return nil, fmt.Errorf("%w: base URL %q does not parse (%s)", ErrOptions, raw, want)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: base URL %q is not http or https (%s)", ErrOptions, u.Redacted(), want)
	case u.Host == "":
		return nil, fmt.Errorf("%w: base URL %q has no host (%s)", ErrOptions, u.Redacted(), want)
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?"):
		// Not shown: a query may hold a key.
		return nil, fmt.Errorf("%w: base URL %s://%s%s has a query or a fragment (expected none: /chat/completions is added to its path)", ErrOptions, u.Scheme, u.Host, u.Path)
	case u.User != nil:
		return nil, fmt.Errorf("%w: base URL %s://%s%s holds a user name or password (expected the key in api_key)", ErrOptions, u.Scheme, u.Host, u.Path)
	}
	return u, nil
}

// Model is the model every request asks for.
func (p *Provider) Model() string { return p.model }

// String names the provider without its key.
func (p *Provider) String() string {
	return fmt.Sprintf("sampling.Provider{host: %s, model: %s}", p.host, p.model)
}

// GoString is String: %#v shows no key either.
func (p *Provider) GoString() string { return p.String() }

// CreateMessage sends one chat-completions request made from req (see the
// package documentation for the mapping) and returns the first choice as
// an MCP result. It is bounded by ctx and by the provider's timeout, and
// sends nothing when a message holds content it cannot carry
// (ErrUnsupportedContent). Other errors wrap ErrProvider (an error
// status), ErrUnreachable, ErrBadReply, or ctx's error.
func (p *Provider) CreateMessage(ctx context.Context, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	body, err := chatRequest(p.model, req)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	resp, err := p.client.CreateChatCompletion(tctx, body)
	if err != nil {
		return nil, p.failure(ctx, tctx, err)
	}
	return result(p.model, resp)
}

// failure words an error of the client without the key, the request's
// text, or the provider's error message.
func (p *Provider) failure(ctx, tctx context.Context, err error) error {
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
		urlErr *url.Error
		synErr *json.SyntaxError
		typErr *json.UnmarshalTypeError
	)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("sampling: %w", ctx.Err())
	case tctx.Err() != nil:
		return fmt.Errorf("sampling: no reply from the provider at %s within %s: %w", p.host, p.timeout, context.DeadlineExceeded)
	case errors.Is(err, errReplyTooLarge):
		return fmt.Errorf("sampling: %w: the reply of the provider at %s is larger than %s", ErrBadReply, p.host, sizeText(replyLimit))
	case errors.As(err, &apiErr):
		return &ProviderError{Model: p.model, Status: apiErr.HTTPStatusCode, Type: identifier(apiErr.Type), Code: identifier(codeText(apiErr.Code))}
	case errors.As(err, &reqErr):
		return &ProviderError{Model: p.model, Status: reqErr.HTTPStatusCode}
	case errors.As(err, &urlErr):
		return fmt.Errorf("sampling: %w at %s: %v", ErrUnreachable, p.host, urlErr.Err)
	case errors.As(err, &synErr), errors.As(err, &typErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("sampling: %w: from the provider at %s: %v", ErrBadReply, p.host, err)
	}
	return fmt.Errorf("sampling: %w", err)
}

func codeText(c any) string {
	switch c := c.(type) {
	case nil:
		return ""
	case string:
		return c
	case int, int64, float64:
		return fmt.Sprint(c)
	}
	return ""
}

// chatRequest is the chat-completions request for req (see the package
// documentation). It fails with ErrUnsupportedContent before anything is
// sent.
func chatRequest(model string, req *mcp.CreateMessageParams) (openai.ChatCompletionRequest, error) {
	out := openai.ChatCompletionRequest{Model: model}
	if req == nil {
		return out, fmt.Errorf("sampling: %w: no request", ErrUnsupportedContent)
	}
	if req.MaxTokens < 0 {
		return out, fmt.Errorf("sampling: %w: negative maxTokens %d", ErrUnsupportedContent, req.MaxTokens)
	}
	if len(req.Messages) == 0 {
		return out, fmt.Errorf("sampling: %w: no messages", ErrUnsupportedContent)
	}
	if req.SystemPrompt != "" {
		out.Messages = append(out.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: req.SystemPrompt})
	}
	for i, m := range req.Messages {
		msg, err := chatMessage(m)
		if err != nil {
			return out, fmt.Errorf("sampling: messages[%d]: %w", i, err)
		}
		out.Messages = append(out.Messages, msg)
	}
	out.MaxTokens = int(req.MaxTokens)
	out.Temperature = float32(req.Temperature)
	out.Stop = req.StopSequences
	// OpenAI's reasoning models refuse max_tokens; the library checks it
	// by name before sending. They take the same bound under its newer
	// name, which not every compatible server knows.
	if errors.Is(openai.NewReasoningValidator().Validate(out), openai.ErrReasoningModelMaxTokensDeprecated) {
		out.MaxCompletionTokens, out.MaxTokens = out.MaxTokens, 0
	}
	return out, nil
}

func chatMessage(m *mcp.SamplingMessage) (openai.ChatCompletionMessage, error) {
	if m == nil {
		return openai.ChatCompletionMessage{}, fmt.Errorf("%w: no message", ErrUnsupportedContent)
	}
	var role string
	switch m.Role {
	case "user":
		role = openai.ChatMessageRoleUser
	case "assistant":
		role = openai.ChatMessageRoleAssistant
	default:
		return openai.ChatCompletionMessage{}, fmt.Errorf("%w: role %q (expected user or assistant)", ErrUnsupportedContent, m.Role)
	}
	switch c := m.Content.(type) {
	case *mcp.TextContent:
		return openai.ChatCompletionMessage{Role: role, Content: c.Text}, nil
	case *mcp.ImageContent:
		if role != openai.ChatMessageRoleUser {
			return openai.ChatCompletionMessage{}, fmt.Errorf("%w: an image in an %s message (the chat-completions API takes images from the user only)", ErrUnsupportedContent, role)
		}
		if !strings.HasPrefix(c.MIMEType, "image/") || strings.ContainsAny(c.MIMEType, ";, ") {
			return openai.ChatCompletionMessage{}, fmt.Errorf("%w: image of type %q (expected image/png, image/jpeg, …)", ErrUnsupportedContent, c.MIMEType)
		}
		data := "data:" + c.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(c.Data)
		return openai.ChatCompletionMessage{Role: role, MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: data}},
		}}, nil
	case *mcp.AudioContent:
		return openai.ChatCompletionMessage{}, fmt.Errorf("%w: audio (mcpflow sends text and images only)", ErrUnsupportedContent)
	case nil:
		return openai.ChatCompletionMessage{}, fmt.Errorf("%w: a message without content", ErrUnsupportedContent)
	}
	return openai.ChatCompletionMessage{}, fmt.Errorf("%w: content of type %T (mcpflow declares no sampling with tools)", ErrUnsupportedContent, m.Content)
}

// result is the MCP result of a chat completion: its first choice.
func result(model string, resp openai.ChatCompletionResponse) (*mcp.CreateMessageResult, error) {
	if len(resp.Choices) == 0 {
		return nil, fmt.Errorf("sampling: %w: no choices", ErrBadReply)
	}
	c := resp.Choices[0]
	text := c.Message.Content
	if text == "" {
		text = c.Message.Refusal
	}
	if resp.Model != "" {
		model = resp.Model
	}
	return &mcp.CreateMessageResult{
		Role:       "assistant",
		Content:    &mcp.TextContent{Text: text},
		Model:      model,
		StopReason: StopReason(string(c.FinishReason)),
	}, nil
}

// StopReason maps a chat-completions finish_reason to MCP's stopReason:
// "stop" → "endTurn", "length" → "maxTokens", "tool_calls" and
// "function_call" → "toolUse", "content_filter" → "contentFilter"; ""
// and "null" (none given) → ""; anything else as it came.
func StopReason(finish string) string {
	switch finish {
	case "stop":
		return "endTurn"
	case "length":
		return "maxTokens"
	case "tool_calls", "function_call":
		return "toolUse"
	case "content_filter":
		return "contentFilter"
	case "", "null":
		return ""
	}
	return finish
}

// errReplyTooLarge ends reading a reply over MaxReplySize.
var errReplyTooLarge = errors.New("reply too large")

// limitedReplies is a transport whose response bodies fail with
// errReplyTooLarge past MaxReplySize.
type limitedReplies struct{ http.RoundTripper }

func (l limitedReplies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.RoundTripper.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: replyLimit}
	}
	return resp, err
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errReplyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// sizeText writes a byte count as people read it: "16 MiB", "1000 bytes".
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
