package server

import "errors"

// ErrStopping: the server is stopping and takes no new work.
var ErrStopping = errors.New("the server is stopping")
