//go:build !unix

package oauth

// locked runs f. Without flock, processes sharing the store may refresh
// one login at once; the later save wins.
func (s *Store) locked(_ string, f func() error) error { return f() }
