//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// askSecret asks question on w and reads one line from the terminal in,
// without echo once the question is shown.
func askSecret(_ context.Context, in *os.File, w io.Writer, question string) ([]byte, error) {
	fmt.Fprint(w, question)
	defer fmt.Fprintln(w)
	return term.ReadPassword(int(in.Fd()))
}
