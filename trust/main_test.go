package trust

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// With trustChildEnv set, the test binary adds directories to a trust store
// and exits: a second process for the concurrent-writer test.
const (
	trustChildEnv  = "MCPFLOW_TRUST_TEST_STORE"
	trustChildDirs = "MCPFLOW_TRUST_TEST_DIRS"
)

func TestMain(m *testing.M) {
	if store := os.Getenv(trustChildEnv); store != "" {
		os.Exit(trustChild(store, os.Getenv(trustChildDirs)))
	}
	os.Exit(m.Run())
}

func trustChild(store, dirs string) int {
	s := OpenStore(store)
	for _, d := range strings.Split(dirs, string(os.PathListSeparator)) {
		if err := s.Add(d); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// self is the test binary (see TestMain).
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
