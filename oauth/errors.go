package oauth

import (
	"fmt"
	"strings"
)

// LoginRequiredError says that a server wants a login mcpflow cannot get
// without a person: none is stored, the stored one expired and could not be
// refreshed, or the server asks for more scopes than it grants (step-up).
// The request it answers was refused before the server acted on it. Its
// text names the command that fixes it, never a token or the server's
// words.
type LoginRequiredError struct {
	// Server is the server entry's name.
	Server string
	// Why is "no login", "expired" or "more scopes".
	Why string
	// Scopes are the scopes the server asked for, when it said.
	Scopes []string
}

func (e *LoginRequiredError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server %q needs a login", e.Server)
	switch e.Why {
	case WhyExpired:
		b.WriteString(" (the stored one expired and could not be refreshed)")
	case WhyScopes:
		fmt.Fprintf(&b, " with more scopes (%s)", strings.Join(e.Scopes, " "))
	case WhyNone:
		b.WriteString(" (none is stored)")
	}
	fmt.Fprintf(&b, ": run mcpflow servers login %s", e.Server)
	return b.String()
}

// Reasons a login is required.
const (
	WhyNone    = "no login"
	WhyExpired = "expired"
	WhyScopes  = "more scopes"
)
