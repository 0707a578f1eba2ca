package journal

import (
	"net/url"
	"strings"
)

// Redact is a journal's location as messages show it: a path as it is, a
// PostgreSQL URL without its password.
func Redact(location string) string {
	if IsPostgres(location) {
		return RedactURL(location)
	}
	return location
}

// RedactURL is rawURL without its password, for messages.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return "postgres (a connection string)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	// Parameters stay (search_path names the journal), but a password.
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// IsPostgres reports whether location names a PostgreSQL journal.
func IsPostgres(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}
