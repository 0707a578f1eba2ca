package engine_test

import (
	"os"
	"testing"

	"github.com/mcpflow/mcpflow/servers"
)

// The test binary doubles as the supervisor of the stdio servers a test
// starts through servers.Connect (the TypeScript SDK server of
// TestTracesExported), as mcpflow's own binary does.
func TestMain(m *testing.M) {
	if servers.Supervising() {
		os.Exit(servers.Supervise(os.Args[1:]))
	}
	os.Exit(m.Run())
}
