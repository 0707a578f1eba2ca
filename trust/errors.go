package trust

import "errors"

var (
	// ErrStore: the workspace trust store cannot be read or written.
	ErrStore = errors.New("workspace trust store")
	// ErrNotTrusted: Remove was given a directory that is not in the store.
	ErrNotTrusted = errors.New("not a trusted workspace")
)
