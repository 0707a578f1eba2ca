package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Login is what a person's login to one server left: the client it used
// and its tokens. It is a secret: it is kept in a Store, never in the
// journal, and never printed.
type Login struct {
	// URL is the server's URL, the resource the tokens are for.
	URL string `json:"url"`
	// Server is the entry's name at login, for people reading the file.
	Server string `json:"server,omitempty"`
	// ClientID is the client the tokens were issued to: configured,
	// a client ID metadata document's URL, or registered at login.
	// ClientSecret is a secret issued by dynamic registration; a
	// configured one is read from the configuration at each refresh.
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style,omitempty"`
	TokenURL     string           `json:"token_url"`
	// Scopes are those the login asked for.
	Scopes []string `json:"scopes,omitempty"`
	// Wanted are scopes a server refused a run for lack of (step-up): the
	// next login asks for them too.
	Wanted []string `json:"wanted,omitempty"`
	// Who is whom the tokens are for, as the authorization server said
	// (an ID token's or a JWT access token's email, name or subject),
	// when it did: for servers list.
	Who string `json:"who,omitempty"`
	// Token is the access token, its refresh token and expiry.
	Token *oauth2.Token `json:"token,omitempty"`
	// At is when the person logged in.
	At time.Time `json:"at"`
}

// Until is when the login's access token expires, zero if it does not say;
// Refreshable whether it can be renewed without a person.
func (l *Login) Until() time.Time {
	if l == nil || l.Token == nil {
		return time.Time{}
	}
	return l.Token.Expiry
}

// Refreshable reports whether the login holds a refresh token.
func (l *Login) Refreshable() bool { return l != nil && l.Token != nil && l.Token.RefreshToken != "" }

// Store keeps logins in a directory private to its owner, a file per
// server URL, each written whole (temporary file, sync, rename) with mode
// 0600. Processes on one machine (mcpflow server, workers, the CLI) share
// it; a refresh holds the file's lock, so that two processes do not spend
// one rotating refresh token.
type Store struct {
	Dir string
}

// DefaultStore is the store under the user's configuration directory:
// $XDG_CONFIG_HOME/mcpflow/tokens (~/.config/mcpflow/tokens).
func DefaultStore() (*Store, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return nil, fmt.Errorf("finding where logins are kept: %w", err)
	}
	return &Store{Dir: filepath.Join(dir, "mcpflow", "tokens")}, nil
}

// file is where the login for serverURL is kept: the host, readable, and a
// digest of the whole URL.
func (s *Store) file(serverURL string) string {
	sum := sha256.Sum256([]byte(Canonical(serverURL)))
	host := "server"
	if u, err := url.Parse(serverURL); err == nil && u.Hostname() != "" {
		host = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				return r
			}
			return '_'
		}, strings.ToLower(u.Hostname()))
	}
	return filepath.Join(s.Dir, host+"-"+hex.EncodeToString(sum[:6])+".json")
}

// Canonical is a server URL as the resource its tokens are for: scheme
// and host lower case, no fragment, no trailing slash.
func Canonical(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return serverURL
	}
	u.Scheme, u.Host, u.Fragment = strings.ToLower(u.Scheme), strings.ToLower(u.Host), ""
	return strings.TrimSuffix(u.String(), "/")
}

// Load returns the login for serverURL, or nil when there is none. A file
// that does not parse is an error that names it; it is left as it is.
func (s *Store) Load(serverURL string) (*Login, error) {
	path := s.file(serverURL)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the login for %s: %w", Canonical(serverURL), err)
	}
	var l Login
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("the login file %s is damaged (log in again, or remove it): %v", path, err)
	}
	if Canonical(l.URL) != Canonical(serverURL) {
		return nil, nil
	}
	return &l, nil
}

// Save writes l whole, replacing the login for its URL.
func (s *Store) Save(l *Login) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("keeping the login: %w", err)
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	path := s.file(l.URL)
	tmp, err := os.CreateTemp(s.Dir, ".login-*")
	if err != nil {
		return fmt.Errorf("keeping the login: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing is there
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.Write(append(b, '\n'))
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err == nil {
			return nil
		}
	} else {
		tmp.Close()
	}
	return fmt.Errorf("keeping the login in %s: %w", path, err)
}

// Remove forgets the login for serverURL; it reports whether there was one.
// It waits for a refresh of the login under way, which would write it
// back.
func (s *Store) Remove(serverURL string) (bool, error) {
	var err error
	if lerr := s.locked(serverURL, func() error { err = os.Remove(s.file(serverURL)); return nil }); lerr != nil {
		return false, fmt.Errorf("forgetting the login for %s: %w", Canonical(serverURL), lerr)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("forgetting the login for %s: %w", Canonical(serverURL), err)
	}
	return true, nil
}

// Want records scopes a server refused a run for lack of, for the next
// login to ask for. Without a stored login there is nothing to add to.
func (s *Store) Want(serverURL string, scopes []string) error {
	if len(scopes) == 0 {
		return nil
	}
	return s.locked(serverURL, func() error {
		l, err := s.Load(serverURL)
		if err != nil || l == nil {
			return err
		}
		l.Wanted = union(l.Wanted, scopes)
		return s.Save(l)
	})
}

// locked runs f holding serverURL's lock, waiting for it TokenTimeout at
// most.
func (s *Store) locked(serverURL string, f func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), TokenTimeout)
	defer cancel()
	return s.lockedCtx(ctx, serverURL, f)
}

// union is a and then those of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// sortedUnique is for messages and comparisons.
func sortedUnique(a []string) []string {
	out := slices.Clone(a)
	sort.Strings(out)
	return slices.Compact(out)
}
