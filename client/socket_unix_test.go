//go:build unix

package client

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckSocket: a socket of this user is talked to; a file, or a
// socket another user made, is not (the second needs root to make).
func TestCheckSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "mcpflow.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := checkSocket(sock); err != nil {
		t.Errorf("own socket: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if err := checkSocket(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a file: %v", err)
	}
	if os.Getuid() != 0 {
		t.Skip("making another user's socket needs root")
	}
	if err := os.Lchown(sock, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := checkSocket(sock); err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Errorf("another user's socket: %v", err)
	}
	if On(sock) {
		t.Error("On: another user's socket counted as a server")
	}
}
