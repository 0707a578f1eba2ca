package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	os.WriteFile(ok, []byte("name: x\n"), 0o600)
	if b, err := Read(ok, 0); err != nil || string(b) != "name: x\n" {
		t.Fatalf("Read = %q, %v", b, err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 101), 0o600)
	if _, err := Read(big, 100); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "larger than 100 bytes") {
		t.Errorf("101 bytes with a limit of 100: %v", err)
	}
	if _, err := Read(dir, 0); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := Read("/dev/zero", 0); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a device") {
		t.Errorf("/dev/zero: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestReadFIFONeverBlocks: a FIFO with no writer would block an open
// forever; Read refuses it without opening it.
func TestReadFIFONeverBlocks(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo, 0); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read blocked on a FIFO with no writer")
	}
}

func TestReadReaderBoundsStdin(t *testing.T) {
	if _, err := ReadReader(strings.NewReader(strings.Repeat("x", 11)), "standard input", 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("11 bytes with a limit of 10: %v", err)
	}
}
