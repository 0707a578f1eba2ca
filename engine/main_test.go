package engine_test

import (
	"os"
	"testing"

	"github.com/mcpflow/mcpflow/upstream"
)

// The test binary doubles as the supervisor of the stdio servers a test
// starts through upstream.Connect (the TypeScript SDK server of
// TestTracesExported), as mcpflow's own binary does.
func TestMain(m *testing.M) {
	if upstream.Supervising() {
		os.Exit(upstream.Supervise(os.Args[1:]))
	}
	os.Exit(m.Run())
}
