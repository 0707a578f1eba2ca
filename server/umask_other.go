//go:build !unix

package server

// private runs fn: this system has no umask.
func private(fn func() error) error { return fn() }
