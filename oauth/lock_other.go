//go:build !unix

package oauth

import "context"

// lockedCtx runs f. Without flock, processes sharing the store may refresh
// one login at once; the later save wins.
func (s *Store) lockedCtx(_ context.Context, _ string, f func() error) error { return f() }
