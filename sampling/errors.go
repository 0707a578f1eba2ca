package sampling

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

var (
	// ErrOptions: the options given to New cannot make a provider.
	ErrOptions = errors.New("invalid sampling options")
	// ErrUnsupportedContent: a message holds content the chat-completions
	// API cannot carry here (audio, tool use, tool results, an image in an
	// assistant message). Nothing was sent.
	ErrUnsupportedContent = errors.New("unsupported content")
	// ErrProvider: the provider answered with an error status
	// (*ProviderError).
	ErrProvider = errors.New("the provider refused the request")
	// ErrUnreachable: the request did not get an answer from the provider
	// (connection refused, TLS, a redirect, a reply cut short).
	ErrUnreachable = errors.New("the provider could not be reached")
	// ErrBadReply: the provider answered 2xx with something that is not a
	// chat completion with at least one choice.
	ErrBadReply = errors.New("the provider's reply is not a chat completion")
)

// ProviderError is an error status from the provider. It holds only what
// is safe to show: the status, and the error's type and code when they are
// identifiers. The provider's own message is left out, since it may quote
// the request or part of the key. errors.Is(err, ErrProvider) holds.
type ProviderError struct {
	Model  string // the model asked for
	Status int    // the HTTP status
	Type   string // the error's type ("invalid_request_error"), or ""
	Code   string // the error's code ("model_not_found"), or ""
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sampling: the provider answered %d %s", e.Status, http.StatusText(e.Status))
	var ids []string
	for _, s := range []string{e.Type, e.Code} {
		if s != "" {
			ids = append(ids, s)
		}
	}
	if len(ids) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(ids, ", "))
	}
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		b.WriteString(": it refused the API key (check api_key)")
	case http.StatusNotFound:
		fmt.Fprintf(&b, ": no model %q, or no chat-completions API at the base URL (check model, and that base_url ends where /chat/completions follows, such as …/v1)", e.Model)
	case http.StatusTooManyRequests:
		b.WriteString(": rate limited or out of quota")
	}
	return b.String()
}

func (e *ProviderError) Unwrap() error { return ErrProvider }

// identifier returns s when it looks like an error type or code (letters,
// digits, '_', '-', '.', at most 64), else "": a provider could put
// anything there.
func identifier(s string) string {
	if len(s) > 64 {
		return ""
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return ""
		}
	}
	return s
}
