package httpapi

import (
	"fmt"

	"github.com/mcpflow/mcpflow/service"
)

// ErrStopping: the server is stopping and takes no new work.
var ErrStopping = fmt.Errorf("the server is %w", service.ErrStopping)
