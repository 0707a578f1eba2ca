//go:build !unix

package httpapi

// private runs fn: this system has no umask.
func private(fn func() error) error { return fn() }
